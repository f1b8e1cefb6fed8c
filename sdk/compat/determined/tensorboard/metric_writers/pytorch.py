"""`TorchWriter`: a torch.utils.tensorboard SummaryWriter (`.writer`) writing into the run's
TensorBoard directory; the harness flushes it before each upload."""

from __future__ import annotations

import warnings
from typing import Any

from determined import tensorboard


def summary_writer() -> Any:
    """A SummaryWriter on the run's TensorBoard directory, flushed by the harness before each upload."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tensorboard.get_base_path({})))
    tensorboard.register_writer(writer)
    return writer


class _TorchWriter(tensorboard.MetricWriter):
    def __init__(self) -> None:
        self.writer: Any = summary_writer()

    def add_scalar(self, name: str, value: Any, step: int) -> None:
        self.writer.add_scalar(name, value, step)

    def reset(self) -> None:
        # Closed: the next write opens a new file, as in Determined.
        self.writer.close()

    def flush(self) -> None:
        self.writer.flush()


class TorchWriter(_TorchWriter):
    """Deprecated in Determined in favour of `context.get_tensorboard_writer()`; works the same."""

    def __init__(self) -> None:
        warnings.warn(
            "TorchWriter() is deprecated in Determined: use PyTorchTrialContext.get_tensorboard_writer(), "
            "or a SummaryWriter on core_context.train.get_tensorboard_path() in a Core API script",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__()
