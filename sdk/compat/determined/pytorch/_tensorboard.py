"""PyTorchTrialContext's TensorBoard methods: the trial's own event files, which the harness uploads
after each workload and `pedl tensorboard EXPERIMENT_ID` shows beside the reported metrics."""

from __future__ import annotations

import pathlib
from typing import Any


class TensorboardMethods:
    _tensorboard_writer: Any = None

    def get_tensorboard_path(self) -> pathlib.Path:
        """The run's TensorBoard directory (created)."""
        from determined import tensorboard

        return tensorboard.get_base_path({})

    def get_tensorboard_writer(self) -> Any:
        """A torch.utils.tensorboard SummaryWriter on that directory, the same one on every call; the
        harness flushes it before each upload."""
        if self._tensorboard_writer is None:
            from determined.tensorboard.metric_writers.pytorch import summary_writer

            self._tensorboard_writer = summary_writer()
        return self._tensorboard_writer
