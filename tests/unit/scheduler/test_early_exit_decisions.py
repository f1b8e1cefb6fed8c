"""A trial that ends itself (Determined's set_stop_requested(True), report_early_exit): its result
says so, the scheduler checkpoints and terminates it, it ends COMPLETED with the reason (what
`pedl trial describe` shows), the searcher hears an early exit, and the experiment goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler import convert
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import trials as trial_ops

CONFIG = """
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: error, max_trials: 2, max_length: {batches: 20}}
batches_per_step: 10
max_restarts: 3
"""
KIND = common_pb2.WorkloadKind
REASON = common_pb2.EarlyExitReason


def workloads(agent) -> list[common_pb2.Workload]:  # type: ignore[no-untyped-def]
    out = []
    while not agent.outbox.empty():
        message = agent.outbox.get_nowait()
        if message.HasField("run_workload"):
            out.append(message.run_workload.workload)
    return out


def complete(  # type: ignore[no-untyped-def]
    manager: ExperimentManager, agent, w: common_pb2.Workload, **fields
) -> None:
    result = common_pb2.WorkloadResult(workload=w, **fields)
    if w.kind == KIND.WORKLOAD_KIND_RUN_STEP:
        result.metrics.update({"loss": 1.0})
        result.num_batches = 10
    elif w.kind == KIND.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS:
        result.metrics.update({"error": 0.5})
    elif w.kind == KIND.WORKLOAD_KIND_CHECKPOINT_MODEL:
        result.checkpoint.CopyFrom(common_pb2.Checkpoint(uuid=f"ck-{w.trial_id}-{w.total_batches}"))
    message = agent_pb2.ConnectRequest(workload_completed=agent_pb2.WorkloadCompleted(result=result))
    manager.on_agent_messages([(agent, message)])


def exit_run(manager: ExperimentManager, agent, trial) -> None:  # type: ignore[no-untyped-def]
    exited = agent_pb2.TrialExited(trial_id=trial.id, run_id=trial.run_id, exit_code=0)
    manager.on_agent_messages([(agent, agent_pb2.ConnectRequest(trial_exited=exited))])


def kinds(ws: list[common_pb2.Workload], trial_id: int) -> list[tuple[str, int]]:
    mine = [w for w in ws if w.trial_id == trial_id]
    return [(KIND.Name(w.kind).removeprefix("WORKLOAD_KIND_"), w.total_batches) for w in mine]


def run(tmp_path: Path, scenario) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        cluster = Cluster()
        agent = cluster.connect(
            agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id=str(i)) for i in range(2)])
        )
        manager = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), cluster, "127.0.0.1:1")
        try:
            manager.create_experiment(CONFIG, b"m", "m")
            manager.tick(0)
            scenario(manager, agent)
        finally:
            manager.db.close()

    asyncio.run(main())


def test_a_trial_that_asks_to_stop_is_checkpointed_and_completes_early_while_the_search_goes_on(
    tmp_path: Path,
) -> None:
    def scenario(manager: ExperimentManager, agent) -> None:  # type: ignore[no-untyped-def]
        first, second = sorted(manager.trials.values(), key=lambda t: t.id)
        sent = workloads(agent)
        assert kinds(sent, first.id) == [("RUN_STEP", 10)]
        step = next(w for w in sent if w.trial_id == first.id)
        complete(manager, agent, step, early_exit=REASON.EARLY_EXIT_REASON_USER_REQUESTED_STOP)
        after = workloads(agent)
        assert kinds(after, first.id) == [("CHECKPOINT_MODEL", 10), ("TERMINATE", 10)]
        complete(manager, agent, after[0])
        exit_run(manager, agent, first)

        row = trial_ops.trial(manager.db, first.id)
        assert row is not None and row["state"] == "COMPLETED" and row["restarts"] == 0
        shown = convert.trial(row)
        assert shown.early_exit == REASON.EARLY_EXIT_REASON_USER_REQUESTED_STOP
        assert shown.latest_checkpoint_uuid == f"ck-{first.id}-10" and shown.error == ""
        assert experiment_ops.experiment_state(manager.db, 1) == "ACTIVE"  # the other trial goes on

        # The other trial runs to its length; then the search is over and the experiment COMPLETED.
        (step,) = [w for w in sent if w.trial_id == second.id]
        complete(manager, agent, step)
        # A closed trial's last step goes out with its validation, checkpoint and terminate.
        tail = workloads(agent)
        assert kinds(tail, second.id) == [
            ("RUN_STEP", 20),
            ("COMPUTE_VALIDATION_METRICS", 20),
            ("CHECKPOINT_MODEL", 20),
            ("TERMINATE", 20),
        ]
        for w in tail[:3]:
            complete(manager, agent, w)
        exit_run(manager, agent, second)
        row = trial_ops.trial(manager.db, second.id)
        assert row is not None and row["state"] == "COMPLETED" and convert.trial(row).early_exit == 0
        assert experiment_ops.experiment_state(manager.db, 1) == "COMPLETED"

    run(tmp_path, scenario)


def test_invalid_hyperparameters_end_the_trial_without_an_error_or_a_restart(tmp_path: Path) -> None:
    def scenario(manager: ExperimentManager, agent) -> None:  # type: ignore[no-untyped-def]
        first, _ = sorted(manager.trials.values(), key=lambda t: t.id)
        step = next(w for w in workloads(agent) if w.trial_id == first.id)
        complete(manager, agent, step, early_exit=REASON.EARLY_EXIT_REASON_INVALID_HP)
        ckpt, _terminate = [w for w in workloads(agent) if w.trial_id == first.id]
        complete(manager, agent, ckpt)
        exit_run(manager, agent, first)
        row = trial_ops.trial(manager.db, first.id)
        assert row is not None and (row["state"], row["restarts"], row["error"]) == ("COMPLETED", 0, "")
        assert convert.trial(row).early_exit == REASON.EARLY_EXIT_REASON_INVALID_HP

    run(tmp_path, scenario)


def test_a_trial_raising_det_invalid_hp_ends_early_without_spending_a_restart(tmp_path: Path) -> None:
    """Determined: `raise det.InvalidHP` in a Trial ends it with INVALID_HP. The harness reports the
    exception's signature with its exit; the scheduler completes the trial instead of restarting it."""

    def scenario(manager: ExperimentManager, agent) -> None:  # type: ignore[no-untyped-def]
        first, _ = sorted(manager.trials.values(), key=lambda t: t.id)
        failure = agent_pb2.FailureSignature(exception_type="determined.InvalidHP", permanent=True)
        exited = agent_pb2.TrialExited(
            trial_id=first.id, run_id=first.run_id, exit_code=1, error="det.InvalidHP: lr", failure=failure
        )
        manager.on_agent_messages([(agent, agent_pb2.ConnectRequest(trial_exited=exited))])
        row = trial_ops.trial(manager.db, first.id)
        assert row is not None and (row["state"], row["restarts"], row["error"]) == ("COMPLETED", 0, "")
        assert convert.trial(row).early_exit == REASON.EARLY_EXIT_REASON_INVALID_HP
        assert experiment_ops.experiment_state(manager.db, 1) == "ACTIVE"
        # random replaces it with a new sample: a third trial exists now.
        assert len(trial_ops.trial_states_of(manager.db, 1)) == 3

    run(tmp_path, scenario)
