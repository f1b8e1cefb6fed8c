"""`det trial kill`: one trial ends CANCELED, the searcher hears it exited early, and the experiment
goes on with its other trials (and ends once they do)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager, NotFound, UserError
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import trials as trial_ops

CONFIG = """
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: error, max_trials: 2, max_length: {batches: 20}}
batches_per_step: 10
"""


def drained(agent) -> list[agent_pb2.ConnectResponse]:
    out = []
    while not agent.outbox.empty():
        out.append(agent.outbox.get_nowait())
    return out


def run(tmp_path: Path, slots: int, scenario) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        cluster = Cluster()
        agent = cluster.connect(
            agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id=str(i)) for i in range(slots)])
        )
        manager = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), cluster, "127.0.0.1:1")
        try:
            manager.create_experiment(CONFIG, b"m", "m")
            manager.tick(0)
            scenario(manager, agent)
        finally:
            manager.db.close()

    asyncio.run(main())


def test_a_running_trial_is_killed_and_the_experiment_goes_on(tmp_path: Path) -> None:
    def scenario(manager: ExperimentManager, agent) -> None:  # type: ignore[no-untyped-def]
        first, second = sorted(manager.trials.values(), key=lambda t: t.id)
        assert first.running and second.running
        drained(agent)
        manager.kill_trial(first.id)
        kills = [m.kill_trial for m in drained(agent) if m.HasField("kill_trial")]
        assert [(k.trial_id, k.run_id) for k in kills] == [(first.id, first.run_id)]
        manager.kill_trial(first.id)  # a second kill while it stops changes nothing
        assert not [m for m in drained(agent) if m.HasField("kill_trial")]

        exited = agent_pb2.TrialExited(trial_id=first.id, run_id=first.run_id, exit_code=-9, killed=True)
        manager.on_agent_messages([(agent, agent_pb2.ConnectRequest(trial_exited=exited))])
        assert trial_ops.trial_state(manager.db, first.id) == "CANCELED"
        assert trial_ops.trial_state(manager.db, second.id) == "ACTIVE"
        assert experiment_ops.experiment_state(manager.db, 1) == "ACTIVE"
        assert list(manager.trials) == [second.id]
        with pytest.raises(UserError, match=f"trial {first.id} has already ended \\(CANCELED\\)"):
            manager.kill_trial(first.id)

    run(tmp_path, 2, scenario)


def test_a_queued_trial_ends_at_once_and_killing_every_trial_ends_the_search(tmp_path: Path) -> None:
    """With no trial left the searcher is done and the experiment ends: CANCELED, as Determined's
    does when a user killed every trial (its test_experiment_manipulation)."""

    def scenario(manager: ExperimentManager, agent) -> None:  # type: ignore[no-untyped-def]
        first, second = sorted(manager.trials.values(), key=lambda t: t.id)
        assert first.running and not second.running
        manager.kill_trial(second.id)
        assert trial_ops.trial_state(manager.db, second.id) == "CANCELED"
        assert experiment_ops.experiment_state(manager.db, 1) == "ACTIVE"
        manager.kill_trial(first.id)
        exited = agent_pb2.TrialExited(trial_id=first.id, run_id=first.run_id, exit_code=-9, killed=True)
        manager.on_agent_messages([(agent, agent_pb2.ConnectRequest(trial_exited=exited))])
        assert [r["state"] for r in trial_ops.trials_of(manager.db, 1)] == ["CANCELED", "CANCELED"]
        assert experiment_ops.experiment_state(manager.db, 1) == "CANCELED"
        assert not manager.experiments

    run(tmp_path, 1, scenario)


def test_an_unknown_trial_is_named(tmp_path: Path) -> None:
    def scenario(manager: ExperimentManager, agent) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(NotFound, match="trial 99 not found"):
            manager.kill_trial(99)

    run(tmp_path, 1, scenario)
