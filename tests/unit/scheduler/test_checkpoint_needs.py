"""The scheduler refuses to delete a checkpoint something will still start from, and says what."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from pedl_scheduler.experiments import ExperimentManager, UserError
from pedl_scheduler.storage.ops import results as result_ops
from tests.unit.scheduler.test_pbt_restart import CONFIG as PBT_CONFIG
from tests.unit.scheduler.test_pbt_restart import start

SINGLE = """
entrypoint: model_def:TinyTrial
hyperparameters: {}
batches_per_step: 10
min_checkpoint_period: {batches: 10}
searcher: {name: single, metric: error, max_length: {batches: 60}}
"""

ASHA = """
entrypoint: model_def:TinyTrial
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
batches_per_step: 10
searcher: {name: adaptive_asha, metric: error, max_trials: 2, max_length: {batches: 40}, divisor: 2,
           mode: aggressive, max_concurrent_trials: 1}
"""


def on_loop(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """The manager acts on an event loop (garbage collection deletes off it)."""

    def run(tmp_path) -> None:  # type: ignore[no-untyped-def]
        asyncio.run(test(tmp_path))

    run.__name__ = test.__name__
    return run


def refusal(manager: ExperimentManager, uuid: str) -> str | None:
    try:
        manager.checkpoints.refuse_if_needed(manager.checkpoints.rows([uuid]))
    except UserError as e:
        return str(e)
    return None


def checkpoints(manager: ExperimentManager, trial_id: int) -> list[str]:
    return [c["uuid"] for c in result_ops.checkpoints_of(manager.db, trial_id)]


@on_loop
async def test_a_live_trials_latest_is_refused_its_older_ones_and_an_ended_trials_are_not(tmp_path) -> None:
    manager, agent = start(str(tmp_path / "s.db"))
    exp_id = manager.create_experiment(SINGLE, b"model", "model")
    manager.schedule()
    (trial_id,) = manager.trials
    while len(checkpoints(manager, trial_id)) < 2:
        assert agent.answer_one()
    older, latest = checkpoints(manager, trial_id)[-2:]
    assert refusal(manager, latest) == (
        f"checkpoint {latest} cannot be deleted now: trial {trial_id} is running and restarts from it "
        "after a failure"
    )
    assert refusal(manager, older) is None
    manager.pause_experiment(exp_id)
    while agent.answer_one():
        pass
    latest = checkpoints(manager, trial_id)[-1]
    assert refusal(manager, latest) == (
        f"checkpoint {latest} cannot be deleted now: trial {trial_id} of experiment {exp_id} (PAUSED) is "
        "queued to resume from it"
    )
    manager.kill_experiment(exp_id)
    assert refusal(manager, latest) is None  # nothing will start from it any more
    manager.db.close()


@on_loop
async def test_the_checkpoint_a_pbt_child_waits_to_copy_is_refused(tmp_path) -> None:
    manager, agent = start(str(tmp_path / "s.db"))
    # Checkpoints every step: the parent holds one older than the round end its child waits for.
    manager.create_experiment(PBT_CONFIG + "min_checkpoint_period: {batches: 10}\n", b"model", "model")
    manager.schedule()
    while not any(t.waiting_on is not None for t in manager.trials.values()):
        assert agent.answer_one()
        manager.schedule()
    (child,) = [t for t in manager.trials.values() if t.waiting_on is not None]
    parent_latest = checkpoints(manager, child.waiting_on)[-1]  # type: ignore[arg-type]
    reason = refusal(manager, parent_latest)
    assert reason is not None and f"cannot be deleted now: trial {child.waiting_on}" in reason
    # Were the parent to end now, the child would copy that checkpoint instead.
    manager.trials[child.waiting_on].latest_checkpoint_uuid = "since-replaced"  # type: ignore[index]
    assert refusal(manager, parent_latest) == (
        f"checkpoint {parent_latest} cannot be deleted now: PBT child trial {child.id} waits to copy trial "
        f"{child.waiting_on}'s latest checkpoint"
    )
    manager.db.close()


@on_loop
async def test_a_stopped_trial_asha_may_promote_keeps_its_latest(tmp_path) -> None:
    manager, agent = start(str(tmp_path / "s.db"))
    exp_id = manager.create_experiment(ASHA, b"model", "model")
    manager.schedule()
    first = min(manager.trials)
    while first in manager.trials or len(manager.trials) == 0:
        assert agent.answer_one()
        manager.schedule()
    stopped = checkpoints(manager, first)[-1]
    assert refusal(manager, stopped) == (
        f"checkpoint {stopped} cannot be deleted now: experiment {exp_id}'s searcher may still promote "
        f"trial {first} and resume it from it"
    )
    manager.db.close()


def test_unknown_and_deleted_checkpoints_are_not_found(tmp_path) -> None:
    manager, _ = start(str(tmp_path / "s.db"))
    with pytest.raises(LookupError, match="checkpoint nope not found"):
        manager.checkpoints.rows(["nope"])
    manager.db.close()


@on_loop
async def test_a_trial_never_resumes_from_a_checkpoint_the_store_lost(tmp_path) -> None:
    manager, agent = start(str(tmp_path / "s.db"))
    exp_id = manager.create_experiment(SINGLE, b"model", "model")
    manager.schedule()
    (trial_id,) = manager.trials
    while len(checkpoints(manager, trial_id)) < 2:
        assert agent.answer_one()
    manager.pause_experiment(exp_id)
    while agent.answer_one():
        pass
    *_, older, lost = checkpoints(manager, trial_id)
    manager.checkpoints.mark([lost], "MISSING")  # what the reconciler does when the store lost it
    assert checkpoints(manager, trial_id)[-1] == older  # no longer listed
    manager.activate_experiment(exp_id)
    manager.schedule()
    starts = []
    while not agent.agent.outbox.empty():
        message = agent.agent.outbox.get_nowait()
        if message.WhichOneof("message") == "start_trial":
            starts.append(message.start_trial)
    (start_trial,) = starts
    assert start_trial.latest_checkpoint_uuid == older
    logs = [r["message"] for r in result_ops.logs_after(manager.db, trial_id, 0)]
    assert (
        f"checkpoint {lost} is gone from the store: trial {trial_id} resumes from checkpoint {older}" in logs
    )
    manager.db.close()


@on_loop
async def test_garbage_collection_keeps_what_a_running_experiment_warm_starts_from(tmp_path) -> None:
    manager, agent = start(str(tmp_path / "s.db"))
    keep_one = SINGLE + "checkpoint_storage: {save_trial_best: 0, save_trial_latest: 1}\n"
    source_exp = manager.create_experiment(keep_one, b"model", "model")
    manager.schedule()
    (source_trial,) = manager.trials
    while len(checkpoints(manager, source_trial)) < 2:
        assert agent.answer_one()
    first, second = checkpoints(manager, source_trial)
    warm = SINGLE.replace(
        "max_length: {batches: 60}}", f"max_length: {{batches: 60}}, source_checkpoint_uuid: {first}}}"
    )
    manager.create_experiment(warm, b"model", "model")
    assert refusal(manager, first) is not None and "warm-starts its trials from it" in str(
        refusal(manager, first)
    )
    while source_exp in manager.experiments:
        manager.schedule()
        assert agent.answer_one()
        await asyncio.sleep(0)
    for _ in range(5):
        await asyncio.sleep(0)  # the deleter's task marks what it deletes
    left = checkpoints(manager, source_trial)
    assert first in left and second not in left  # the save_* policy dropped the other older one
    manager.db.close()
