"""The one interface between workload execution and a framework's trial (PyTorch, ...).

The harness and local/test mode both drive trials only through `TrialController`, so there
is a single code path for training, validation and checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class StepResult:
    """What one `train_until` call did: metrics averaged over its batches ("loss", unless a
    DeepSpeedTrial names others)."""

    metrics: dict[str, Any] = field(default_factory=dict)
    num_batches: int = 0
    num_inputs: int = 0


@runtime_checkable
class TrialController(Protocol):
    @property
    def batches_trained(self) -> int:
        """Batches trained in all, across restarts."""
        ...

    def train_until(self, total_batches: int) -> StepResult:
        """Trains until `total_batches` batches have been trained in all (absolute target)."""
        ...

    def validate(self) -> dict[str, Any]:
        """Metrics averaged over one pass of the whole validation set, as plain floats/lists."""
        ...

    def save(self, path: Path) -> None:
        """Writes everything needed to resume exactly into the (existing, empty) directory."""
        ...

    def load(self, path: Path) -> None:
        """Restores the state `save` wrote."""
        ...

    def warm_start(self, path: Path) -> None:
        """Takes the model and optimizer state `save` wrote, staying at batch 0 with this trial's own
        data position and random state (`searcher.source_checkpoint_uuid`, as Determined does)."""
        ...
