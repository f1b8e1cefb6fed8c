"""The checkpoint GC tasks the scheduler has not yet ended, as Determined's master lists them.

Determined deletes an experiment's checkpoints in a task named "Checkpoint GC (Experiment N)", which
its task listings show until the files are gone; its clients and e2e tests wait on that. pedl's
deleter (`checkpoint_deleter.py`) opens one such task per experiment for every deletion (garbage
collection and users' deletes alike) and ends it once the store has deleted the task's checkpoints
(or failed to: the rows stay DELETING for a retry). A deletion's tasks run one after another, an
experiment at a time; separate deletions run side by side.
Pure bookkeeping: no I/O.
"""

from __future__ import annotations

import uuid as uuid_lib
from dataclasses import dataclass, field

from pedl._timeutil import utc_now
from pedl.v1 import scheduler_pb2


@dataclass
class GcTask:
    experiment_id: int
    checkpoint_uuids: list[str]
    task_id: str = field(default_factory=lambda: str(uuid_lib.uuid4()))
    started_at: str = field(default_factory=utc_now)
    running: bool = False  # False while an earlier task of the same deletion runs

    @property
    def name(self) -> str:
        """Determined's name for the task, which its clients match."""
        return f"Checkpoint GC (Experiment {self.experiment_id})"

    def to_proto(self) -> scheduler_pb2.CheckpointGcTask:
        return scheduler_pb2.CheckpointGcTask(
            task_id=self.task_id,
            experiment_id=self.experiment_id,
            checkpoint_uuids=self.checkpoint_uuids,
            started_at=self.started_at,
            running=self.running,
            name=self.name,
        )


class GcTasks:
    """The open GC tasks, in the order they were opened."""

    def __init__(self) -> None:
        self._open: dict[str, GcTask] = {}

    def open(self, by_experiment: dict[int, list[str]]) -> list[GcTask]:
        """One task per experiment for its checkpoints (experiments in id order)."""
        tasks = [GcTask(exp_id, uuids) for exp_id, uuids in sorted(by_experiment.items()) if uuids]
        self._open.update((t.task_id, t) for t in tasks)
        return tasks

    def end(self, task: GcTask) -> None:
        self._open.pop(task.task_id, None)

    def listing(self) -> list[GcTask]:
        """Running tasks first, then those waiting, each group in the order opened."""
        tasks = list(self._open.values())
        return [t for t in tasks if t.running] + [t for t in tasks if not t.running]
