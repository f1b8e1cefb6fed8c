"""`pedl experiment activate` of an experiment that ended ERROR: revived from its trials' checkpoints when
the infrastructure ended it (as an older pedl left one after a store outage), refused with one line
when its trials' own code failed. Runs the real scheduler core on a database, across a restart."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import update

from pedl._metrics import to_struct
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.experiments import KIND_NAMES, ExperimentManager, UserError
from pedl_scheduler.experiments.restart_policy import RestartBackoff, ended_by_infrastructure
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_scheduler.storage.tables import checkpoints, trials

CONFIG = """
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: error, max_trials: 2, max_length: {batches: 40}}
batches_per_step: 10
min_checkpoint_period: {batches: 20}
max_restarts: 0
"""

STORE_DOWN = (
    "Traceback (most recent call last):\n  ...\npedl.harness.store_client.StoreUnavailable: "
    "checkpoint store at 127.0.0.1:9 unreachable (Connection refused)"
)
USER_BUG = "Traceback (most recent call last):\n  ...\nValueError: bad layer size"


def start(db_path: str) -> tuple[ExperimentManager, AgentHandle]:
    cluster = Cluster()
    agent = cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0")]))
    manager = ExperimentManager(
        open_storage(db_path), cluster, "127.0.0.1:1", restart_backoff=RestartBackoff(0)
    )
    return manager, agent


def answer_one(manager: ExperimentManager, agent: AgentHandle, fail_after_checkpoint: str = "") -> bool:
    """Answers the next workload; with `fail_after_checkpoint`, a run that has saved a checkpoint then
    exits with that error instead of going on."""
    while not agent.outbox.empty():
        message = agent.outbox.get_nowait()
        if message.WhichOneof("message") != "run_workload":
            continue
        w = message.run_workload.workload
        kind = KIND_NAMES[w.kind]
        trial = manager.trials.get(w.trial_id)
        if fail_after_checkpoint and trial is not None and trial.latest_checkpoint_uuid:
            manager.on_trial_exited(
                agent,
                agent_pb2.TrialExited(
                    trial_id=w.trial_id, run_id=w.run_id, exit_code=1, error=fail_after_checkpoint
                ),
            )
            return True
        if kind is Kind.TERMINATE:
            manager.on_trial_exited(agent, agent_pb2.TrialExited(trial_id=w.trial_id, run_id=w.run_id))
            return True
        result = common_pb2.WorkloadResult(workload=w, num_batches=10)
        if kind is Kind.RUN_STEP:
            result.metrics.CopyFrom(to_struct({"loss": 0.5}))
        elif kind is Kind.COMPUTE_VALIDATION_METRICS:
            result.metrics.CopyFrom(to_struct({"error": 0.25}))
        else:
            result.checkpoint.CopyFrom(common_pb2.Checkpoint(uuid=str(uuid.uuid4()), trial_id=w.trial_id))
        manager.on_workload_completed(agent, result)
        return True
    return False


def run(manager: ExperimentManager, agent: AgentHandle, exp_id: int, error: str = "") -> str:
    for _ in range(500):
        manager.schedule()
        if not answer_one(manager, agent, error) and exp_id not in manager.experiments:
            break
    return experiment_ops.experiment_state(manager.db, exp_id) or ""


async def ended_in_error(db_path: str, error: str, legacy: bool, checkpoints_deleted: bool = False) -> int:
    """An experiment whose trials each failed with `error` after a checkpoint at batch 20; with
    `legacy`, its rows say no cause, as an older pedl left them."""
    manager, agent = start(db_path)
    exp_id = manager.create_experiment(CONFIG, b"model", "model")
    assert run(manager, agent, exp_id, error) == "ERROR"
    if legacy:
        with manager.db.transaction():
            manager.db.defer(update(trials).values(end_cause=""), {})
    if checkpoints_deleted:  # as a save_* policy keeping none does once the experiment ends
        with manager.db.transaction():
            manager.db.defer(update(checkpoints).values(state="DELETED"), {})
    manager.db.close()
    return exp_id


def test_an_experiment_a_store_outage_ended_under_an_older_pedl_completes_once_activated(tmp_path) -> None:
    async def scenario() -> None:
        db_path = str(tmp_path / "scheduler.db")
        exp_id = await ended_in_error(db_path, STORE_DOWN, legacy=True)
        manager, agent = start(db_path)  # a restarted (upgraded) scheduler
        manager.recover()
        manager.on_agent_registered(agent, [])
        manager.activate_experiment(exp_id)
        assert experiment_ops.experiment_state(manager.db, exp_id) == "ACTIVE"
        manager.schedule()
        answer_one(manager, agent)
        manager.db.close()  # the scheduler dies mid-run: the revival must have been journaled

        manager, agent = start(db_path)
        manager.recover()
        manager.on_agent_registered(agent, [])
        manager.expire_unconfirmed(float("inf"))
        assert run(manager, agent, exp_id) == "COMPLETED"
        for row in trial_ops.trials_of(manager.db, exp_id):
            assert row["state"] == "COMPLETED" and row["error"] == ""
            logs = "\n".join(
                r["message"] for r in result_ops.logs_after(manager.db, row["id"], 0, limit=10**6)
            )
            assert "revived by activate" in logs and "(batch 20)" in logs, logs
            # Its steps are whole: the two before the outage, the two after its checkpoint at batch 20.
            assert [s["total_batches"] for s in result_ops.steps_of(manager.db, row["id"])] == [
                10,
                20,
                30,
                40,
            ]
        manager.db.close()

    asyncio.run(scenario())


def test_a_trial_whose_checkpoint_the_ended_experiments_policy_deleted_starts_over(tmp_path) -> None:
    async def scenario() -> None:
        db_path = str(tmp_path / "scheduler.db")
        exp_id = await ended_in_error(db_path, STORE_DOWN, legacy=True, checkpoints_deleted=True)
        manager, agent = start(db_path)
        manager.recover()
        manager.on_agent_registered(agent, [])
        manager.activate_experiment(exp_id)
        assert all(not t.latest_checkpoint_uuid for t in manager.trials.values())
        assert run(manager, agent, exp_id) == "COMPLETED"
        for row in trial_ops.trials_of(manager.db, exp_id):
            logs = "\n".join(
                r["message"] for r in result_ops.logs_after(manager.db, row["id"], 0, limit=10**6)
            )
            assert "it resumes from the beginning" in logs, logs
        manager.db.close()

    asyncio.run(scenario())


def test_an_experiment_its_own_code_ended_is_refused_with_the_reason(tmp_path) -> None:
    async def scenario() -> None:
        db_path = str(tmp_path / "scheduler.db")
        exp_id = await ended_in_error(db_path, USER_BUG, legacy=False)
        manager, _ = start(db_path)
        manager.recover()
        with pytest.raises(UserError) as refused:
            manager.activate_experiment(exp_id)
        message = str(refused.value)
        assert "\n" not in message and "own code" in message and "ValueError: bad layer size" in message
        assert experiment_ops.experiment_state(manager.db, exp_id) == "ERROR"
        manager.db.close()

    asyncio.run(scenario())


def test_a_new_pedl_records_a_trials_own_error_as_its_code_even_if_it_mentions_the_store(tmp_path) -> None:
    """An exception the user's code raised with store-like text is still the user's (end_cause user)."""

    async def scenario() -> None:
        db_path = str(tmp_path / "scheduler.db")
        exp_id = await ended_in_error(db_path, STORE_DOWN, legacy=False)
        manager, _ = start(db_path)
        rows = trial_ops.trials_of(manager.db, exp_id)
        assert {r["end_cause"] for r in rows} == {"user"}
        with pytest.raises(UserError, match="own code"):
            manager.activate_experiment(exp_id)
        manager.db.close()

    asyncio.run(scenario())


def test_which_recorded_ends_count_as_the_infrastructures() -> None:
    assert ended_by_infrastructure("infrastructure", "anything")
    assert not ended_by_infrastructure("user", STORE_DOWN)
    assert ended_by_infrastructure("", STORE_DOWN)
    assert ended_by_infrastructure("", "agent a0 was lost (after 5 restarts, max_restarts is 5)")
    assert ended_by_infrastructure("", "the checkpoint store is unreachable")
    assert not ended_by_infrastructure("", USER_BUG)
    assert not ended_by_infrastructure("", "")
