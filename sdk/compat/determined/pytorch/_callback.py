"""`det.pytorch.PyTorchCallback`, the base class of the objects `build_callbacks()` returns, and
`TrialCallbacks`, which calls them where Determined's PyTorchTrial loop does: training start, each
epoch's start and end, each training step's end, validation start and end, checkpoint save (the
callback may add entries to the checkpoint's state dict) and load, and their `state_dict()` kept in
the checkpoint. Hooks pedl does not call (trial startup and shutdown, the checkpoint upload's end)
are refused in one line when a callback overrides them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pedl.model_def.errors import describe

# Hooks a callback may override but pedl never calls: a trial relying on them is refused.
_NOT_CALLED = ("on_trial_startup", "on_trial_shutdown", "on_checkpoint_upload_end")


class PyTorchCallback:
    """Determined's callback hooks; override those you need."""

    def on_trial_startup(self, first_batch_idx: int, checkpoint_uuid: str | None) -> None: ...

    def on_training_start(self) -> None: ...

    def on_training_epoch_start(self, epoch_idx: int) -> None: ...

    def on_training_epoch_end(self, epoch_idx: int) -> None: ...

    def on_training_workload_end(self, avg_metrics: dict[str, Any], batch_metrics: Any) -> None: ...

    def on_validation_start(self) -> None: ...

    def on_validation_end(self, metrics: dict[str, Any]) -> None: ...

    def on_checkpoint_save_start(self, checkpoint: dict[str, Any]) -> None: ...

    def on_checkpoint_load_start(self, checkpoint: dict[str, Any]) -> None: ...

    def on_checkpoint_write_end(self, checkpoint_dir: str) -> None: ...

    def on_checkpoint_end(self, checkpoint_dir: str) -> None: ...

    def on_checkpoint_upload_end(self, uuid: str) -> None: ...

    def on_trial_shutdown(self) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


class TrialCallbacks:
    """The trial's `build_callbacks()`, checked, with one method per point of the loop."""

    def __init__(self, callbacks: Any, where: str) -> None:
        if not isinstance(callbacks, Mapping) or not all(
            isinstance(c, PyTorchCallback) for c in callbacks.values()
        ):
            raise TypeError(f"{where} must return a dict of names to det.pytorch.PyTorchCallback objects")
        for name, callback in callbacks.items():
            for hook in _NOT_CALLED:
                if getattr(type(callback), hook) is not getattr(PyTorchCallback, hook):
                    raise TypeError(
                        f"{where}: callback {name!r} overrides {hook} "
                        f"({describe(getattr(type(callback), hook))}), which pedl does not call"
                    )
        self.callbacks: dict[str, PyTorchCallback] = dict(callbacks)
        self._started = False
        self._epoch: int | None = None

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    def before_batch(self, epoch_idx: int) -> None:
        if not self._started:
            self._started = True
            for c in self.callbacks.values():
                c.on_training_start()
        if self._epoch != epoch_idx:
            self._epoch = epoch_idx
            for c in self.callbacks.values():
                c.on_training_epoch_start(epoch_idx)

    def after_batch(self, epoch_idx: int, epoch_ended: bool) -> None:
        if epoch_ended:
            for c in self.callbacks.values():
                c.on_training_epoch_end(epoch_idx)

    def step_ended(self, metrics: dict[str, Any]) -> None:
        for c in self.callbacks.values():
            c.on_training_workload_end(metrics, [])

    def validation_started(self) -> None:
        for c in self.callbacks.values():
            c.on_validation_start()

    def validation_ended(self, metrics: dict[str, Any]) -> None:
        for c in self.callbacks.values():
            c.on_validation_end(metrics)

    def saving(self, state: dict[str, Any]) -> None:
        """Before the checkpoint's state is written: each callback's state_dict, then its hook."""
        state["callbacks"] = {name: c.state_dict() for name, c in self.callbacks.items()}
        for c in self.callbacks.values():
            c.on_checkpoint_save_start(state)

    def saved(self, path: str) -> None:
        for c in self.callbacks.values():
            c.on_checkpoint_write_end(path)
            c.on_checkpoint_end(path)

    def loading(self, state: dict[str, Any]) -> None:
        for c in self.callbacks.values():
            c.on_checkpoint_load_start(state)
        saved = state.get("callbacks") or {}
        for name, c in self.callbacks.items():
            if name in saved:
                c.load_state_dict(saved[name])
