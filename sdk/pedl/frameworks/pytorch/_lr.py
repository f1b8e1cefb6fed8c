"""LRScheduler: a torch LR scheduler with a step mode, as PEDL 0.11 and Determined wrap them."""

from __future__ import annotations

import enum
from typing import Any


class LRScheduler:
    """Wraps a `torch.optim.lr_scheduler` object; the trainer calls `step()` as `step_mode` says."""

    class StepMode(enum.Enum):
        STEP_EVERY_EPOCH = 1
        STEP_EVERY_BATCH = 2
        MANUAL_STEP = 3
        STEP_EVERY_OPTIMIZER_STEP = 4

    def __init__(self, scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1) -> None:
        if not callable(getattr(scheduler, "step", None)):
            raise TypeError(
                f"LRScheduler needs a torch LR scheduler with step(), got {type(scheduler).__name__}"
            )
        if not isinstance(step_mode, LRScheduler.StepMode):
            raise TypeError(f"LRScheduler step_mode must be an LRScheduler.StepMode, got {step_mode!r}")
        if frequency < 1:
            raise ValueError(f"LRScheduler frequency must be at least 1, got {frequency}")
        self.scheduler = scheduler
        self._step_mode = step_mode
        self._frequency = frequency

    def step(self, *args: Any, **kwargs: Any) -> None:
        self.scheduler.step(*args, **kwargs)

    def get_last_lr(self) -> list[float]:
        return list(self.scheduler.get_last_lr())

    def state_dict(self) -> dict[str, Any]:
        return dict(self.scheduler.state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state)

    def after_update(self, batch_indices: range, epochs_ended: int) -> None:
        """Called after the optimizers stepped, for the training batches (0-based) since they last did
        and the epochs that ended meanwhile: one batch and at most one epoch without gradient
        aggregation; with `aggregation_frequency` N, the LR steps of N batches come together, as in
        Determined (an LR scheduler never steps between optimizer steps)."""
        if self._step_mode is LRScheduler.StepMode.STEP_EVERY_BATCH:
            for batch_idx in batch_indices:
                if (batch_idx + 1) % self._frequency == 0:
                    self.scheduler.step()
        elif self._step_mode is LRScheduler.StepMode.STEP_EVERY_EPOCH:
            for _ in range(epochs_ended):
                self.scheduler.step()

    def after_optimizer_step(self) -> None:
        if self._step_mode is LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP:
            self.scheduler.step()


class StateGroup:
    """Several optimizers or schedulers checkpointed as one (`state_dict` is a list, in order)."""

    def __init__(self, members: list[Any]) -> None:
        self.members = members

    def state_dict(self) -> list[Any]:
        return [m.state_dict() for m in self.members]

    def load_state_dict(self, states: list[Any]) -> None:
        if len(states) != len(self.members):
            raise ValueError(
                f"the checkpoint holds {len(states)} states, but this trial has {len(self.members)}"
            )
        for member, state in zip(self.members, states, strict=True):
            member.load_state_dict(state)
