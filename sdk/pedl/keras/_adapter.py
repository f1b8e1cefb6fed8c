"""PEDL 0.11's KerasDataAdapter (`pedl.frameworks.keras.data`), here so that the one Keras
controller unwraps it for every Keras interface (KerasTrial and TFKerasTrial alike)."""

from __future__ import annotations

from typing import Any


class KerasDataAdapter:
    """Wraps a `keras.utils.Sequence` (or PyDataset, or tf.data.Dataset) for make_data_loaders.

    pedl loads batches in the trial process, in order, so that a checkpoint records an exact
    data position; `workers`, `use_multiprocessing` and `max_queue_size` are accepted for
    compatibility and do not start loader processes."""

    def __init__(
        self, data: Any, use_multiprocessing: bool = False, workers: int = 1, max_queue_size: int = 10
    ) -> None:
        if workers < 0 or max_queue_size < 1:
            raise ValueError(
                "KerasDataAdapter: workers must be >= 0 and max_queue_size >= 1, "
                f"got {workers} and {max_queue_size}"
            )
        self.data = data
        self.use_multiprocessing = use_multiprocessing
        self.workers = workers
        self.max_queue_size = max_queue_size


def unwrap_data(source: Any) -> Any:
    """The Sequence, PyDataset or Dataset a KerasDataAdapter wraps; any other source as it is."""
    return source.data if isinstance(source, KerasDataAdapter) else source
