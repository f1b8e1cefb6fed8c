"""A gang over two agents ends when both agents have reported its exit: a COMPLETED trial's logs
hold every rank's last lines, and a member that never reports is killed after a grace period."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

from pedl._metrics import to_struct
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.experiments import KIND_NAMES, ExperimentManager, run_exits
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops

CONFIG = """
hyperparameters: {x: 1}
searcher: {name: single, metric: error, max_length: {batches: 10}}
batches_per_step: 10
resources: {slots_per_trial: 2}
max_restarts: 0
"""


def _sent(agent: AgentHandle) -> list[agent_pb2.ConnectResponse]:
    out = []
    while not agent.outbox.empty():
        m = agent.outbox.get_nowait()
        out.extend(m.batch.messages if m.WhichOneof("message") == "batch" else [m])
    return out


def _train_until_terminate(manager: ExperimentManager, chief: AgentHandle) -> None:
    """Plays the chief's harness until the scheduler sends TERMINATE."""
    for _ in range(20):
        workloads = [
            m.run_workload.workload for m in _sent(chief) if m.WhichOneof("message") == "run_workload"
        ]
        for w in workloads:
            if KIND_NAMES[w.kind] is Kind.TERMINATE:
                return
            result = common_pb2.WorkloadResult(workload=w, num_batches=10)
            kind = KIND_NAMES[w.kind]
            if kind is Kind.RUN_STEP:
                result.metrics.CopyFrom(to_struct({"loss": 0.5}))
            elif kind is Kind.COMPUTE_VALIDATION_METRICS:
                result.metrics.CopyFrom(to_struct({"error": 0.1}))
            else:
                result.checkpoint.CopyFrom(common_pb2.Checkpoint(uuid=str(uuid.uuid4()), trial_id=w.trial_id))
            done = agent_pb2.ConnectRequest(workload_completed=agent_pb2.WorkloadCompleted(result=result))
            manager.on_agent_messages([(chief, done)])
    raise AssertionError("the scheduler never sent TERMINATE")


def _exited(trial_id: int, run_id: int) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(trial_exited=agent_pb2.TrialExited(trial_id=trial_id, run_id=run_id))


def _logs(trial_id: int, run_id: int, line: str) -> agent_pb2.ConnectRequest:
    batch = agent_pb2.TrialLogs(
        trial_id=trial_id, run_id=run_id, lines=[common_pb2.LogLine(source="stdout", message=line)]
    )
    return agent_pb2.ConnectRequest(trial_logs=batch)


def run(
    tmp_path: Path, scenario: Callable[[ExperimentManager, AgentHandle, AgentHandle, int, int], None]
) -> None:
    async def main() -> None:
        cluster = Cluster()
        a, b = (
            cluster.connect(agent_pb2.RegisterAgent(agent_id=name, slots=[common_pb2.Slot(id="0")]))
            for name in ("a", "b")
        )
        manager = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), cluster, "127.0.0.1:1")
        try:
            manager.create_experiment(CONFIG, b"m", "m")
            manager.tick(0)
            (trial,) = manager.trials.values()
            assert trial.running and set(trial.gang_agents()) == {"a", "b"}
            chief = a if trial.agent_id == "a" else b
            other = b if chief is a else a
            _sent(other)
            _train_until_terminate(manager, chief)
            scenario(manager, chief, other, trial.id, trial.run_id)
        finally:
            manager.db.close()

    asyncio.run(main())


def test_the_trial_completes_only_after_every_member_reported_its_exit_with_its_last_lines(
    tmp_path: Path,
) -> None:
    def scenario(manager, chief, other, trial_id, run_id) -> None:  # type: ignore[no-untyped-def]
        manager.on_agent_messages([(chief, _exited(trial_id, run_id))])
        assert trial_ops.trial_state(manager.db, trial_id) == "ACTIVE"
        assert experiment_ops.experiment_state(manager.db, 1) == "ACTIVE"

        manager.on_agent_messages(
            [(other, _logs(trial_id, run_id, "rank 1 last line")), (other, _exited(trial_id, run_id))]
        )
        assert trial_ops.trial_state(manager.db, trial_id) == "COMPLETED"
        assert experiment_ops.experiment_state(manager.db, 1) == "COMPLETED"
        assert "rank 1 last line" in [
            row["message"] for row in result_ops.logs_after(manager.db, trial_id, 0)
        ]

    run(tmp_path, scenario)


def test_a_member_that_never_reports_its_exit_is_killed_and_the_trial_completes(tmp_path: Path) -> None:
    def scenario(manager, chief, other, trial_id, run_id) -> None:  # type: ignore[no-untyped-def]
        manager.on_agent_messages([(other, _exited(trial_id, run_id))])
        _sent(chief)
        manager.tick(10**9)  # long past the grace
        kills = [m.kill_trial for m in _sent(chief) if m.WhichOneof("message") == "kill_trial"]
        assert [(k.trial_id, k.run_id) for k in kills] == [(trial_id, run_id)]
        assert trial_ops.trial_state(manager.db, trial_id) == "COMPLETED"
        assert experiment_ops.experiment_state(manager.db, 1) == "COMPLETED"

    assert run_exits.GANG_EXIT_GRACE_SECONDS < 10**9
    run(tmp_path, scenario)
