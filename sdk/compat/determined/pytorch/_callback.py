"""`det.pytorch.PyTorchCallback`, the base class of the objects `build_callbacks()` returns.

Trials that import it load; a trial whose build_callbacks() returns any is refused in one line when
its controller is built (pedl does not run PyTorch callbacks; README, "Code written for Determined")."""

from __future__ import annotations

from typing import Any


class PyTorchCallback:
    """Determined's callback hooks, named so that subclasses written for Determined import."""

    def on_trial_startup(self, first_batch_idx: int, checkpoint_uuid: str | None) -> None: ...

    def on_training_start(self) -> None: ...

    def on_training_epoch_start(self, epoch_idx: int) -> None: ...

    def on_training_epoch_end(self, epoch_idx: int) -> None: ...

    def on_training_workload_end(self, avg_metrics: dict[str, Any], batch_metrics: Any) -> None: ...

    def on_validation_start(self) -> None: ...

    def on_validation_end(self, metrics: dict[str, Any]) -> None: ...

    def on_checkpoint_save_start(self, checkpoint: dict[str, Any]) -> None: ...

    def on_checkpoint_end(self, checkpoint_dir: str) -> None: ...

    def on_trial_shutdown(self) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...
