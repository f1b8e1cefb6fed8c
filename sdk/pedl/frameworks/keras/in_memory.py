"""`pedl.frameworks.keras.data.InMemorySequence`: PEDL 0.11's Keras Sequence over arrays held in
memory (its published iris example builds its loaders with it)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from keras.utils import PyDataset


def _batch(values: Any, start: int, stop: int) -> Any:
    """Rows start..stop of an array, DataFrame, or a list or dict of them (a multi-input model's)."""
    if values is None:
        return None
    if isinstance(values, dict):
        return {k: _batch(v, start, stop) for k, v in values.items()}
    if isinstance(values, (list, tuple)):
        return [_batch(v, start, stop) for v in values]
    return np.asarray(values)[start:stop]


def _length(values: Any) -> int:
    if isinstance(values, dict):
        values = next(iter(values.values()))
    elif isinstance(values, (list, tuple)):
        values = values[0]
    return len(values)


class InMemorySequence(PyDataset):
    """Batches of `batch_size` rows of `data` and `labels` (and `sample_weight`), in order; the last
    batch holds what is left."""

    def __init__(self, data: Any, labels: Any, batch_size: int, sample_weight: Any = None) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"InMemorySequence: batch_size must be at least 1, got {batch_size}")
        self.data = data
        self.labels = labels
        self.batch_size = int(batch_size)
        self.sample_weight = sample_weight
        self._rows = _length(data)
        if _length(labels) != self._rows:
            raise ValueError(f"InMemorySequence: {self._rows} rows of data but {_length(labels)} labels")

    def __len__(self) -> int:
        return math.ceil(self._rows / self.batch_size)

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        start = index * self.batch_size
        stop = min(start + self.batch_size, self._rows)
        x, y = _batch(self.data, start, stop), _batch(self.labels, start, stop)
        if self.sample_weight is None:
            return x, y
        return x, y, _batch(self.sample_weight, start, stop)
