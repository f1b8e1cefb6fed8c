"""`adaptive_asha`: rungs, promotions of the top 1/divisor, brackets, resumption, stop_once, restore."""

from __future__ import annotations

from typing import Any

import pytest
from searcher_sim import SimTrial, Simulator

from pedl.config import parse_experiment_config
from pedl.searcher import Close, Create, Resume, Shutdown, ValidateAfter, make_search_method
from pedl.searcher.asha import AsyncHalvingSearch
from pedl.searcher.concurrency import ConcurrencyLimiter


def config(searcher: str, **fields: Any) -> Any:
    extra = "".join(f", {k}: {v}" for k, v in fields.items())
    return parse_experiment_config(
        f"""
hyperparameters:
  x: {{type: double, minval: 0, maxval: 1}}
  opt: {{type: categorical, vals: [sgd, adam]}}
searcher: {{name: adaptive_asha, metric: loss{extra}, {searcher}}}
batches_per_step: 10
"""
    )


def by_x(trial: SimTrial) -> float:
    """Better (smaller) for smaller x; the ranking is the same at every length."""
    return trial.hparams["x"] + 100.0 / trial.trained


def rung_lengths(sim: Simulator) -> set[int]:
    return {op.length for op in sim.log if isinstance(op, ValidateAfter)}


def check_promotions(sim: Simulator, lengths: list[int], divisor: float, stop_once: bool) -> None:
    """Replays the run: each move to a higher rung was earned by ranking in that rung's top 1/divisor."""
    root = {t.request_id: t.root for t in sim.trials.values()}
    seen: dict[int, list[tuple[float, str]]] = {length: [] for length in lengths}
    for event in sim.timeline:
        if event[0] == "report":
            _, request_id, length, metric = event
            seen[length].append((metric, root[request_id]))
        elif isinstance(event[1], ValidateAfter) and event[1].length != lengths[0]:
            op = event[1]
            below = seen[lengths[lengths.index(op.length) - 1]]
            ranked = [r for _, r in sorted(below, key=lambda e: e[0])]
            allowed = int(len(ranked) / divisor)
            if stop_once:
                allowed = max(allowed, 1)
            assert root[op.request_id] in ranked[:allowed], f"{op} was not earned"


def test_rungs_are_max_length_over_powers_of_the_divisor_and_max_trials_configs_run() -> None:
    cfg = config("max_trials: 64, max_length: 640, max_rungs: 4, mode: aggressive", max_concurrent_trials=8)
    sim = Simulator(make_search_method(cfg, seed=1), by_x, seed=2).run()
    assert rung_lengths(sim) == {10, 40, 160, 640}
    assert len(sim.created()) == len(sim.trials) == 64  # promotions continue trials: no extra ones
    assert any(t.resumes for t in sim.trials.values())
    assert sim.max_open == 8
    assert sim.shutdown == Shutdown()
    check_promotions(sim, [10, 40, 160, 640], 4, stop_once=False)
    # With a fixed ranking ASHA finds the best configuration and trains it to the end.
    best = min(sim.trials.values(), key=lambda t: t.hparams["x"])
    assert max(t.trained for t in sim.trials.values() if t.root == best.root) == 640
    assert sim.searcher.progress() == 1.0


def test_a_stopped_trial_promoted_later_continues_as_the_same_trial() -> None:
    """As Determined's adaptive_asha: a promotion opens the same trial again (no new trial), which goes
    on from where it stopped, so the search has max_trials trials."""
    cfg = config("max_trials: 2, max_length: 160, divisor: 2, mode: aggressive", max_concurrent_trials=1)
    metrics = {"r1": 0.5, "r2": 0.7}
    sim = Simulator(make_search_method(cfg, seed=0), lambda t: metrics[t.root], seed=0).run()
    first, second = sim.created()
    assert sim.log == [
        first,
        ValidateAfter("r1", 80),
        Close("r1"),  # alone in its rung: nothing is promoted yet
        second,
        ValidateAfter("r2", 80),
        Close("r2"),  # r2 is worse; now that the rung has two results, r1 is promoted
        Resume("r1"),
        ValidateAfter("r1", 160),
        Close("r1"),  # bound for the top rung: closed as it starts
        Close("r1"),  # and again with its result (idempotent; trials closed before that still close)
        Shutdown(),
    ]
    r1 = sim.trials["r1"]
    assert (r1.resumes, r1.start, r1.validations) == (1, 0, [(80, 0.5), (160, 0.5)])
    assert len(sim.trials) == 2


def test_stop_once_keeps_the_best_so_far_going_and_never_resumes_a_stopped_trial() -> None:
    cfg = config(
        "max_trials: 2, max_length: 160, divisor: 2, mode: aggressive, stop_once: true",
        max_concurrent_trials=1,
    )
    metrics = {"r1": 0.5, "r2": 0.3}
    sim = Simulator(make_search_method(cfg, seed=0), lambda t: metrics[t.root], seed=0).run()
    assert [op for op in sim.log if not isinstance(op, Create)] == [
        ValidateAfter("r1", 80),
        ValidateAfter("r1", 160),  # the first result is the best so far
        Close("r1"),  # the top rung: decided up front
        Close("r1"),
        ValidateAfter("r2", 80),
        ValidateAfter("r2", 160),  # better than r1 at 80: in the top half
        Close("r2"),
        Close("r2"),
        Shutdown(),
    ]
    big = config(
        "max_trials: 50, max_length: 160, stop_once: true, mode: aggressive", max_concurrent_trials=5
    )
    sim = Simulator(make_search_method(big, seed=3), by_x, seed=5).run()
    assert all(c.checkpoint_from is None for c in sim.created())
    check_promotions(sim, [10, 40, 160], 4, stop_once=True)


def test_larger_is_better_promotes_the_largest_metric() -> None:
    cfg = config(
        "max_trials: 2, max_length: 160, divisor: 2, mode: aggressive",
        max_concurrent_trials=1,
        smaller_is_better="false",
    )
    metrics = {"r1": 0.5, "r2": 0.7}
    sim = Simulator(make_search_method(cfg, seed=0), lambda t: metrics[t.root], seed=0).run()
    assert ValidateAfter("r2", 160) in sim.log
    assert not any(c.checkpoint_from for c in sim.created())


def test_standard_mode_splits_trials_over_brackets_for_equal_compute() -> None:
    cfg = config("max_trials: 40, max_length: 640", max_concurrent_trials=6)
    sim = Simulator(make_search_method(cfg, seed=4), by_x, seed=1).run()
    first_rung: dict[int, int] = {}
    for trial in sim.trials.values():
        if trial.checkpoint_from is None:
            first = trial.validations[0][0] if trial.validations else None
            first_rung[first] = first_rung.get(first, 0) + 1
    # max_rungs 5 is capped to 3 (4^3 > 40 trials); standard mode runs brackets of 3 and 2 rungs.
    assert first_rung == {40: 30, 160: 10}
    assert sim.max_open <= 6


def test_conservative_mode_runs_a_bracket_per_rung_count() -> None:
    cfg = config("max_trials: 30, max_length: 160, mode: conservative", max_concurrent_trials=0)
    ops = make_search_method(cfg, seed=0).initial_operations()
    first = [op.length for op in ops if isinstance(op, ValidateAfter)]
    assert len(first) == 30  # no concurrency limit: every trial starts at once
    assert set(first) == {10, 40, 160}


def test_trials_that_exit_early_rank_last_and_each_bracket_still_trains_one_to_the_end() -> None:
    cfg = config("max_trials: 16, max_length: 160, mode: standard", max_concurrent_trials=4)
    # The best half of the configurations crash the moment they are promoted.
    sim = Simulator(
        make_search_method(cfg, seed=2),
        by_x,
        seed=3,
        fails=lambda t: t.trained > 0 and t.hparams["x"] < 0.5,
    ).run()
    assert any(t.state == "ERROR" for t in sim.trials.values())
    assert any(t.trained == 160 and t.state == "COMPLETED" for t in sim.trials.values())
    assert sim.max_open <= 4


def test_every_trial_crashing_still_ends_the_search() -> None:
    cfg = config("max_trials: 9, max_length: 90, mode: standard", max_concurrent_trials=3)
    sim = Simulator(make_search_method(cfg, seed=2), by_x, seed=3, fails=lambda t: True).run()
    assert len(sim.created()) == 9


@pytest.mark.parametrize("stop_once", ["false", "true"])
@pytest.mark.parametrize("cut", [5, 40, 111])
def test_a_restored_searcher_continues_exactly_as_an_uninterrupted_one(stop_once: str, cut: int) -> None:
    cfg = config(f"max_trials: 30, max_length: 320, stop_once: {stop_once}", max_concurrent_trials=4)

    def fails(t: SimTrial) -> bool:
        return t.root in ("r7", "r12") and t.trained > 0

    whole = Simulator(make_search_method(cfg, seed=6), by_x, seed=8, fails=fails).run()
    halves = Simulator(make_search_method(cfg, seed=6), by_x, seed=8, fails=fails)
    halves.run_events(cut)
    halves.swap_in_restored(lambda: make_search_method(cfg, seed=6))
    assert halves.run().log == whole.log


def test_progress_grows_to_one() -> None:
    cfg = config("max_trials: 20, max_length: 160", max_concurrent_trials=4)
    sim = Simulator(make_search_method(cfg, seed=0), by_x, seed=0)
    sim.start()
    seen = [sim.searcher.progress()]
    while sim.step():
        seen.append(sim.searcher.progress())
    assert seen[0] == 0.0 and seen[-1] == 1.0
    assert seen == sorted(seen)
    assert 0.3 < seen[len(seen) // 2] < 0.99


def async_halving(fields: str) -> Any:
    return parse_experiment_config(
        "hyperparameters:\n  x: {type: double, minval: 0, maxval: 1}\n"
        f"searcher: {{name: async_halving, metric: loss, {fields}}}\nbatches_per_step: 10\n"
    )


def test_async_halving_runs_one_bracket_of_num_rungs_with_every_trial() -> None:
    cfg = async_halving("num_rungs: 3, max_trials: 27, max_length: 270, divisor: 3, max_concurrent_trials: 4")
    assert cfg.searcher["stop_once"] is False  # Determined's defaults filled
    search = make_search_method(cfg, seed=1)
    assert isinstance(search, ConcurrencyLimiter) and isinstance(search.method, AsyncHalvingSearch)
    assert [(len(b.rung_lengths), b.max_trials) for b in search.method.brackets] == [(3, 27)]
    sim = Simulator(search, by_x, seed=2).run()
    assert rung_lengths(sim) == {30, 90, 270}
    assert len([c for c in sim.created() if c.checkpoint_from is None]) == 27
    assert sim.max_open == 4 and sim.shutdown == Shutdown()
    check_promotions(sim, [30, 90, 270], 3, stop_once=False)
    best = min(sim.trials.values(), key=lambda t: t.hparams["x"])
    assert max(t.trained for t in sim.trials.values() if t.root == best.root) == 270


def test_stopped_trials_asha_may_still_promote_keep_their_checkpoints() -> None:
    """The scheduler refuses to delete the latest checkpoint of a trial ASHA may resume."""
    cfg = config("max_trials: 2, max_length: 160, divisor: 2, mode: aggressive", max_concurrent_trials=1)
    asha = make_search_method(cfg, seed=0)
    asha.initial_operations()
    assert asha.resumable_requests() == set()  # r1 is training
    asha.on_validation_completed("r1", 0.5, 80)
    asha.on_trial_closed("r1")
    assert asha.resumable_requests() == {"r1"}  # stopped, alone in its rung: promotable later
    asha.on_validation_completed("r2", 0.7, 80)
    ops = asha.on_trial_closed("r2")
    assert Resume("r1") in ops
    assert asha.resumable_requests() == {"r2"}  # r1 was promoted; r2 may still be
    once = make_search_method(
        config("max_trials: 2, max_length: 160, divisor: 2, mode: aggressive, stop_once: true"), seed=0
    )
    once.initial_operations()
    once.on_validation_completed("r1", 0.5, 80)
    assert once.resumable_requests() == set()  # stop_once never resumes a stopped trial
