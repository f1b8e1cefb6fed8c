"""Warm starts at create: the source checkpoint must exist and be the requester's (or an admin's), and
every trial of the new experiment is started from it at batch 0 unless it has a checkpoint of its own."""

from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace

import pytest

from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.experiments.errors import UserError
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_server_auth import Principal
from tests.unit.scheduler.test_pbt_restart import ScriptedAgent, start

SOURCE = """
entrypoint: model_def:TinyTrial
hyperparameters: {learning_rate: 0.1}
batches_per_step: 10
searcher: {name: single, metric: error, max_length: {batches: 20}}
"""
ALICE = Principal("alice", admin=False, kind="user")
BOB = Principal("bob", admin=False, kind="user")
ADMIN = Principal("root", admin=True, kind="user")


def warm(line: str) -> str:
    return SOURCE.replace("max_length: {batches: 20}}", f"max_length: {{batches: 20}}, {line}}}")


def run_to_end(manager: ExperimentManager, agent: ScriptedAgent, exp_id: int) -> None:
    async def loop() -> None:
        for _ in range(500):
            manager.schedule()
            await asyncio.sleep(0)
            if not agent.answer_one() and exp_id not in manager.experiments:
                return

    asyncio.run(loop())
    assert experiment_ops.experiment_state(manager.db, exp_id) == "COMPLETED"


@pytest.fixture
def source(tmp_path):
    manager, agent = start(str(tmp_path / "scheduler.db"))
    exp_id = manager.create_experiment(SOURCE, b"model", "model", owner="alice", requester=ALICE)
    run_to_end(manager, agent, exp_id)
    (row,) = trial_ops.trials_of(manager.db, exp_id)
    yield manager, agent, SimpleNamespace(id=row["id"], latest_checkpoint_uuid=row["latest_checkpoint_uuid"])
    manager.db.close()


def start_trial_messages(agent: ScriptedAgent):
    """The StartTrial messages sent to the agent; the other messages stay queued for it to answer."""
    messages, others = [], []
    while not agent.agent.outbox.empty():
        m = agent.agent.outbox.get_nowait()
        (messages if m.WhichOneof("message") == "start_trial" else others).append(m)
    for m in others:
        agent.agent.outbox.put_nowait(m)
    return [m.start_trial for m in messages]


@pytest.mark.parametrize("requester", [ALICE, ADMIN], ids=["owner", "admin"])
def test_every_trial_starts_from_the_source_checkpoint_at_batch_0(source, requester) -> None:
    manager, agent, trial = source
    uuid = trial.latest_checkpoint_uuid
    config = warm(f"source_checkpoint_uuid: {uuid}").replace("name: single", "name: grid")
    manager.create_experiment(config, b"model", "model", owner=requester.username, requester=requester)
    manager.schedule()
    (started,) = start_trial_messages(agent)
    assert started.warm_start_checkpoint_uuid == uuid
    assert started.latest_checkpoint_uuid == "" and started.latest_checkpoint_batches == 0


def test_source_trial_id_means_that_trials_latest_checkpoint(source) -> None:
    manager, agent, trial = source
    manager.create_experiment(warm(f"source_trial_id: {trial.id}"), b"m", "model", "alice", ALICE)
    manager.schedule()
    (started,) = start_trial_messages(agent)
    assert started.warm_start_checkpoint_uuid == trial.latest_checkpoint_uuid


def restart(manager: ExperimentManager, tmp_path) -> tuple[ExperimentManager, ScriptedAgent]:
    manager.db.close()  # the scheduler dies; the experiment's warm start is stored with it
    manager, agent = start(str(tmp_path / "scheduler.db"))
    manager.recover()
    manager.on_agent_registered(agent.agent, [])
    manager.expire_unconfirmed(float("inf"))
    manager.schedule()
    return manager, agent


def test_a_trial_with_its_own_checkpoint_resumes_from_it_not_the_source(source, tmp_path) -> None:
    manager, agent, trial = source
    uuid = trial.latest_checkpoint_uuid
    config = warm(f"source_checkpoint_uuid: {uuid}").replace("batches: 20", "batches: 40")
    exp_id = manager.create_experiment(config, b"m", "model", "alice", ALICE)

    async def scenario() -> None:
        nonlocal manager, agent
        manager, agent = restart(manager, tmp_path)
        (started,) = start_trial_messages(agent)
        assert started.warm_start_checkpoint_uuid == uuid
        (new,) = [t for t in manager.trials.values() if t.experiment_id == exp_id]
        while not new.latest_checkpoint_uuid:
            assert agent.answer_one()
            manager.schedule()
            await asyncio.sleep(0)
        own = new.latest_checkpoint_uuid
        manager, agent = restart(manager, tmp_path)
        (started,) = start_trial_messages(agent)
        assert started.latest_checkpoint_uuid == own != uuid
        assert started.warm_start_checkpoint_uuid == ""

    asyncio.run(scenario())


def test_an_unknown_checkpoint_is_refused_at_create(source) -> None:
    manager, _, _ = source
    with pytest.raises(UserError, match="searcher.source_checkpoint_uuid: checkpoint nosuch does not exist"):
        manager.create_experiment(warm("source_checkpoint_uuid: nosuch"), b"m", "model", "alice", ALICE)
    with pytest.raises(UserError, match="searcher.source_trial_id: trial 999 does not exist"):
        manager.create_experiment(warm("source_trial_id: 999"), b"m", "model", "alice", ALICE)
    assert len(manager.experiments) == 0


def test_another_users_checkpoint_is_refused_at_create(source) -> None:
    manager, _, trial = source
    with pytest.raises(
        UserError, match="belongs to experiment 1 of user 'alice': only its owner or an admin"
    ):
        manager.create_experiment(
            warm(f"source_checkpoint_uuid: {trial.latest_checkpoint_uuid}"), b"m", "model", "bob", BOB
        )
    with pytest.raises(UserError, match="only its owner or an admin"):
        manager.create_experiment(warm(f"source_trial_id: {trial.id}"), b"m", "model", "bob", BOB)


@pytest.mark.parametrize("state", ["DELETING", "DELETED", "MISSING"])
def test_a_source_whose_bytes_are_going_or_gone_is_refused(source, state) -> None:
    manager, _, trial = source
    uuid = trial.latest_checkpoint_uuid
    result_ops.set_checkpoint_state(manager.db, [uuid], state)
    manager.db.flush()
    for line, message in [
        (f"source_checkpoint_uuid: {uuid}", f"checkpoint {uuid} does not exist (it is {state})"),
        (f"source_trial_id: {trial.id}", f"trial {trial.id} has no checkpoint to start from"),
    ]:
        with pytest.raises(UserError, match=re.escape(message)):
            manager.create_experiment(warm(line), b"m", "model", "alice", ALICE)
