"""`determined.tensorboard`: where a trial writes its own TensorBoard event files, and Determined's
metric writers. The files land in the run's TensorBoard directory, which the harness uploads to the
experiment's checkpoint storage after each workload; `pedl tensorboard EXPERIMENT_ID` shows them
beside the metrics the trial reports."""

from __future__ import annotations

import abc
import pathlib
from typing import Any

from pedl.harness.tensorboard_sync import register_writer, tensorboard_dir


def get_base_path(checkpoint_config: dict[str, Any] | None = None) -> pathlib.Path:
    """The run's TensorBoard directory (created); Determined's takes the checkpoint config, which
    does not change where pedl's is."""
    return tensorboard_dir()


class MetricWriter(abc.ABC):
    """Determined's interface of a scalar writer (TorchWriter, TFWriter)."""

    @abc.abstractmethod
    def add_scalar(self, name: str, value: Any, step: int) -> None: ...

    @abc.abstractmethod
    def reset(self) -> None: ...

    def flush(self) -> None:  # noqa: B027 - optional, as in Determined
        pass


__all__ = ["MetricWriter", "get_base_path", "register_writer"]
