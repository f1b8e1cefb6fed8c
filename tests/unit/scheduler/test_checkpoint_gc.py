"""The save_experiment_best / save_trial_best / save_trial_latest policy, live trials and protection."""

from __future__ import annotations

import itertools
import random

import pytest

from pedl_scheduler.checkpoint_gc import CheckpointLedger, CheckpointRef, GCPolicy, checkpoints_to_delete


def ck(trial: int, batches: int) -> CheckpointRef:
    return CheckpointRef(uuid=f"t{trial}-b{batches:04d}", trial_id=trial, total_batches=batches)


def deleted(
    ckpts: list[CheckpointRef],
    metrics: dict[tuple[int, int], float] | None = None,
    live: tuple[int, ...] = (),
    protected: tuple[str, ...] = (),
    **policy: object,
) -> list[str]:
    return checkpoints_to_delete(ckpts, metrics or {}, GCPolicy(**policy), live, protected)  # type: ignore[arg-type]


# Trial 1: checkpoints at 10..40, best at 20. Trial 2: checkpoints at 10..30, best at 10.
TWO_TRIALS = [ck(1, 10), ck(1, 20), ck(1, 30), ck(1, 40), ck(2, 10), ck(2, 20), ck(2, 30)]
METRICS = {(1, 10): 0.9, (1, 20): 0.2, (1, 30): 0.5, (1, 40): 0.4, (2, 10): 0.3, (2, 20): 0.6, (2, 30): 0.7}


def test_defaults_keep_each_trials_latest_and_best() -> None:
    assert GCPolicy() == GCPolicy(0, 1, 1, True)
    assert deleted(TWO_TRIALS, METRICS) == ["t1-b0010", "t1-b0030", "t2-b0020"]


def test_larger_is_better_flips_the_best() -> None:
    assert deleted(TWO_TRIALS, METRICS, smaller_is_better=False) == [
        "t1-b0020",
        "t1-b0030",
        "t2-b0010",
        "t2-b0020",
    ]


def test_latest_only() -> None:
    assert deleted(TWO_TRIALS, METRICS, save_trial_best=0) == [
        "t1-b0010",
        "t1-b0020",
        "t1-b0030",
        "t2-b0010",
        "t2-b0020",
    ]


def test_several_latest_and_several_best() -> None:
    kept = set(c.uuid for c in TWO_TRIALS) - set(
        deleted(TWO_TRIALS, METRICS, save_trial_latest=2, save_trial_best=2)
    )
    # trial 1: latest 40, 30; best 20 (0.2), 40 (0.4). trial 2: latest 30, 20; best 10, 20.
    assert kept == {"t1-b0040", "t1-b0030", "t1-b0020", "t2-b0030", "t2-b0020", "t2-b0010"}


def test_experiment_best_across_trials() -> None:
    result = deleted(TWO_TRIALS, METRICS, save_experiment_best=2, save_trial_best=0, save_trial_latest=0)
    # Best two overall: trial 1 @20 (0.2) and trial 2 @10 (0.3).
    assert sorted(set(c.uuid for c in TWO_TRIALS) - set(result)) == ["t1-b0020", "t2-b0010"]


def test_all_zero_deletes_everything_not_live_or_protected() -> None:
    everything = [c.uuid for c in TWO_TRIALS]
    assert deleted(TWO_TRIALS, METRICS, save_trial_best=0, save_trial_latest=0) == everything


def test_live_trials_latest_is_never_deleted() -> None:
    result = deleted(TWO_TRIALS, METRICS, live=(2,), save_trial_best=0, save_trial_latest=0)
    assert "t2-b0030" not in result and "t1-b0040" in result


def test_protected_checkpoints_are_never_deleted() -> None:
    result = deleted(TWO_TRIALS, METRICS, protected=("t1-b0010", "unknown"), save_trial_latest=0)
    assert "t1-b0010" not in result
    assert "unknown" not in result


def test_checkpoints_without_a_validation_cannot_be_best() -> None:
    ckpts = [ck(1, 10), ck(1, 20), ck(1, 30)]
    # Only batch 10 has a validation; 30 stays as latest; 20 is neither.
    assert deleted(ckpts, {(1, 10): 5.0, (1, 25): 0.0}) == ["t1-b0020"]
    # No validations at all: only the latest survives.
    assert deleted(ckpts) == ["t1-b0010", "t1-b0020"]
    # A validation of another trial at the same batch count does not count.
    assert deleted(ckpts, {(2, 20): 0.0}) == ["t1-b0010", "t1-b0020"]


def test_ties_in_the_metric_keep_the_more_trained_checkpoint() -> None:
    ckpts = [ck(1, 10), ck(1, 20), ck(1, 30)]
    metrics = {(1, 10): 0.5, (1, 20): 0.5, (1, 30): 0.9}
    assert deleted(ckpts, metrics) == ["t1-b0010"]


def test_ties_across_trials_keep_the_more_trained_then_the_lower_trial() -> None:
    ckpts = [ck(1, 10), ck(2, 10), ck(3, 20)]
    tied = {(1, 10): 0.1, (2, 10): 0.1, (3, 20): 0.1}
    kept = {c.uuid for c in ckpts} - set(
        deleted(ckpts, tied, save_experiment_best=1, save_trial_best=0, save_trial_latest=0)
    )
    assert kept == {"t3-b0020"}
    kept = {c.uuid for c in ckpts} - set(
        deleted(ckpts, tied, save_experiment_best=2, save_trial_best=0, save_trial_latest=0)
    )
    assert kept == {"t3-b0020", "t1-b0010"}


def test_equal_batch_counts_in_one_trial_are_resolved_deterministically() -> None:
    a = CheckpointRef("aaa", 1, 10)
    b = CheckpointRef("bbb", 1, 10)
    assert deleted([a, b]) == ["bbb"]
    assert deleted([b, a]) == ["bbb"]


def test_result_does_not_depend_on_input_order() -> None:
    expected = deleted(TWO_TRIALS, METRICS, save_experiment_best=1)
    rng = random.Random(0)
    for _ in range(20):
        shuffled = TWO_TRIALS[:]
        rng.shuffle(shuffled)
        assert deleted(shuffled, METRICS, save_experiment_best=1) == expected


def test_keep_counts_larger_than_the_checkpoints_delete_nothing() -> None:
    assert deleted(TWO_TRIALS, METRICS, save_trial_latest=10) == []
    assert deleted([], METRICS) == []


def test_kept_set_is_the_union_of_the_rules() -> None:
    """Brute force: every combination of counts keeps exactly latest ∪ best ∪ experiment best."""
    for exp_best, trial_best, latest in itertools.product(range(4), repeat=3):
        result = set(
            deleted(
                TWO_TRIALS,
                METRICS,
                save_experiment_best=exp_best,
                save_trial_best=trial_best,
                save_trial_latest=latest,
            )
        )
        keep: set[str] = set()
        overall = sorted(TWO_TRIALS, key=lambda c: METRICS[(c.trial_id, c.total_batches)])
        keep.update(c.uuid for c in overall[:exp_best])
        for trial in (1, 2):
            own = [c for c in TWO_TRIALS if c.trial_id == trial]
            keep.update(c.uuid for c in sorted(own, key=lambda c: -c.total_batches)[:latest])
            ranked = sorted(own, key=lambda c: METRICS[(c.trial_id, c.total_batches)])
            keep.update(c.uuid for c in ranked[:trial_best])
        assert result == {c.uuid for c in TWO_TRIALS} - keep


def test_policy_from_storage_config() -> None:
    assert GCPolicy.from_storage({}, smaller_is_better=False) == GCPolicy(0, 1, 1, False)
    policy = GCPolicy.from_storage({"type": "shared_fs", "save_trial_latest": 3}, smaller_is_better=True)
    assert policy == GCPolicy(0, 1, 3, True)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2", None])
def test_bad_counts_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="checkpoint_storage.save_trial_best must be an integer >= 0"):
        GCPolicy(save_trial_best=bad)  # type: ignore[arg-type]


def test_duplicate_or_empty_uuids_are_refused() -> None:
    with pytest.raises(ValueError, match="listed twice"):
        deleted([ck(1, 10), ck(1, 10)])
    with pytest.raises(ValueError, match="has no uuid"):
        deleted([CheckpointRef("", 1, 10)])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "0.5"])
def test_non_finite_metrics_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="trial 1 at batch 10 must be a finite number"):
        deleted([ck(1, 10)], {(1, 10): bad})  # type: ignore[dict-item]


@pytest.mark.parametrize("seed", range(30))
def test_the_ledger_deletes_exactly_what_a_full_collection_would(seed: int) -> None:
    """The scheduler's incremental ledger re-decides only the trials that changed; at every
    collection of a random search its verdict equals `checkpoints_to_delete` over everything."""
    rng = random.Random(seed)
    policy = GCPolicy(
        save_experiment_best=rng.choice([0, 1, 3]),
        save_trial_best=rng.choice([0, 1, 2]),
        save_trial_latest=rng.choice([0, 1, 2]),
        smaller_is_better=rng.random() < 0.5,
    )
    ledger = CheckpointLedger(policy)
    stored: list[CheckpointRef] = []
    metrics: dict[tuple[int, int], float] = {}
    doomed: set[str] = set()
    live: dict[int, int] = {}  # trial -> batches trained
    latest: dict[int, str] = {}
    next_trial = 1
    for _ in range(200):
        event = rng.random()
        if event < 0.15 or not live:
            live[next_trial] = 0
            next_trial += 1
            continue
        trial = rng.choice(sorted(live))
        if event < 0.5:
            live[trial] += 10
            metrics[(trial, live[trial])] = rng.choice([0.1, 0.2, 0.3, 0.5, 0.8])  # ties happen
            ledger.add_metric(trial, live[trial], metrics[(trial, live[trial])])
        elif event < 0.8:
            ref = ck(trial, live[trial])
            if ref not in stored:
                stored.append(ref)
                ledger.add_checkpoint(ref)
                latest[trial] = ref.uuid
        else:
            del live[trial]  # the trial ended
        protected = {latest[t] for t in live if t in latest}
        expected = set(checkpoints_to_delete(stored, metrics, policy, set(live), protected))
        doomed.update(ledger.collect(set(live), protected))
        assert doomed == expected
        # The store confirms some deletions; confirmed ones are gone from the rows (state DELETED).
        for uuid in sorted(doomed):
            if rng.random() < 0.5 and ledger.deleted(uuid):
                doomed.discard(uuid)
                stored = [c for c in stored if c.uuid != uuid]


def test_the_ledger_offers_unconfirmed_deletions_again() -> None:
    ledger = CheckpointLedger(GCPolicy())
    for batches, error in ((10, 0.5), (20, 0.4), (30, 0.6)):
        ledger.add_metric(1, batches, error)
        ledger.add_checkpoint(ck(1, batches))
    assert ledger.collect(live_trial_ids=(), protected=()) == ["t1-b0010"]
    assert ledger.collect(live_trial_ids=(), protected=()) == ["t1-b0010"]  # the store was away
    assert ledger.deleted("t1-b0010")
    assert ledger.collect(live_trial_ids=(), protected=()) == []
