"""Determined's task listings (`GET /api/v1/tasks`, and `GET /tasks`, which its e2e tests poll while
checkpoints are deleted) show the scheduler's checkpoint GC tasks beside the running trials, named as
Determined names them."""

from __future__ import annotations

from typing import Any

from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui.rest.cluster import allocations, legacy_shape
from pedl_webui.rest.common import Caller

TASK = "5f0c2a7e-1b7d-4d0e-9a51-3c2f8d6e0b12"


class _Scheduler:
    """One agent whose slot runs trial 4 of experiment 2, and a GC task for experiment 9."""

    def call(self, token: str, method: str, message: Any) -> Any:
        if method == "GetTrial":
            return scheduler_pb2.GetTrialResponse(
                trial=scheduler_pb2.Trial(id=4, experiment_id=2, start_time="2026-11-29T17:59:00.000Z")
            )
        assert method == "ListAgents"
        agent = scheduler_pb2.Agent(id="a1", slots=[common_pb2.Slot(id="0", trial_id=4)])
        gc = scheduler_pb2.CheckpointGcTask(
            task_id=TASK,
            experiment_id=9,
            checkpoint_uuids=["u1"],
            started_at="2026-11-29T18:00:00.000Z",
            running=True,
            name="Checkpoint GC (Experiment 9)",
        )
        return scheduler_pb2.ListAgentsResponse(agents=[agent], gc_tasks=[gc])


def test_gc_tasks_are_listed_beside_the_trials_under_determineds_names() -> None:
    summaries = allocations(Caller(_Scheduler(), "tok"))  # type: ignore[arg-type]
    assert {s["name"] for s in summaries.values()} == {
        "Trial 4 (Experiment 2)",
        "Checkpoint GC (Experiment 9)",
    }
    gc = summaries[f"{TASK}.1"]
    assert gc["taskId"] == TASK and gc["allocationId"] == f"{TASK}.1"
    assert gc["slotsNeeded"] == 0 and gc["resources"] == []
    assert gc["registeredTime"] == "2026-11-29T18:00:00.000Z"
    # Determined's `det task list` sorts the summaries by registeredTime: every one has it.
    assert sorted(s["registeredTime"] for s in summaries.values())[0] == "2026-11-29T17:59:00.000Z"
    legacy = legacy_shape(summaries)[f"{TASK}.1"]
    assert legacy["name"] == "Checkpoint GC (Experiment 9)" and legacy["task_id"] == TASK
