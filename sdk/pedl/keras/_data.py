"""Keras training data as an endless stream of batches with a restorable position.

Sources: a batched `tf.data.Dataset`, a `keras.utils.PyDataset` (or Sequence), a generator
function (called once per epoch), or NumPy arrays `(x, y)` / `(x, y, sample_weight)` batched
here. A resumed trial re-creates the source and moves to the saved (epoch, offset): datasets
replay their own seeded order, arrays are shuffled per epoch from a seed kept in the state.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from pedl.tensorflow import _datasets

ACCEPTED = (
    "a batched tf.data.Dataset, a keras.utils.PyDataset, a generator function (called once per epoch), "
    "or a tuple of NumPy arrays (x, y) or (x, y, sample_weight)"
)


@dataclass
class Arrays:
    """In-memory arrays, batched by `batch_size`; training shuffles each epoch."""

    arrays: tuple[Any, ...]
    batch_size: int
    shuffle: bool = True

    def __len__(self) -> int:
        n = len(tf.nest.flatten(self.arrays[0])[0])
        return -(-n // self.batch_size)

    def batch(self, order: np.ndarray, index: int) -> tuple[Any, ...]:
        rows = order[index * self.batch_size : (index + 1) * self.batch_size]
        return tuple(None if a is None else tf.nest.map_structure(lambda v: v[rows], a) for a in self.arrays)


def check_source(source: Any, role: str, origin: str, batch_size: int | None, batch_size_origin: str) -> Any:
    """`source` if pedl can read it (arrays wrapped in `Arrays`), else a TypeError naming `origin`."""
    if isinstance(source, (tf.data.Dataset, keras.utils.PyDataset)):
        return source
    if inspect.isgenerator(source) or (isinstance(source, Iterator) and not callable(source)):
        raise TypeError(
            f"{origin}: the {role} data is an already started generator, which cannot be read once per "
            "epoch; return the generator function itself (PEDL calls it for every epoch)"
        )
    if (
        isinstance(source, tuple)
        and len(source) in (2, 3)
        and isinstance(source[0], (np.ndarray, dict, list))
    ):
        if batch_size is None:
            raise TypeError(
                f"{origin}: the {role} data are arrays, so {batch_size_origin} must return the batch size"
            )
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise TypeError(f"{batch_size_origin} must return a positive int, got {batch_size!r}")
        return Arrays(tuple(source), batch_size, shuffle=role == "training")
    if callable(source):
        return source
    raise TypeError(
        f"{origin}: the {role} data is a {type(source).__module__}.{type(source).__qualname__}; "
        f"expected {ACCEPTED}"
    )


def unpack(batch: Any) -> tuple[Any, Any, Any]:
    """(x, y, sample_weight) of a batch."""
    if isinstance(batch, (tuple, list)) and len(batch) in (1, 2, 3):
        return (*batch, None, None)[:3]  # type: ignore[return-value]
    return batch, None, None


def batch_length(x: Any) -> int:
    flat = tf.nest.flatten(x)
    if not flat:
        return 0
    shape = getattr(flat[0], "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else 1


class TrainingStream:
    def __init__(self, source: Any, seed: int) -> None:
        self.source = source
        self.seed = seed  # for shuffling arrays
        self.epoch = 0
        self.offset = 0  # batches taken from the current epoch
        self._iterator: Iterator[Any] | None = None
        self._serialized: bytes | None = None
        if isinstance(source, tf.data.Dataset):
            self._serialized = _datasets.serialize(source, "the training dataset")

    def _epoch_iterator(self) -> Iterator[Any]:
        source = self.source
        if self._serialized is not None:
            # A fresh copy replays the dataset's seeded order; its epochs are reshuffled by repeat().
            dataset = _datasets.from_serialized(self._serialized, source.element_spec)
            return iter(dataset.repeat().skip(self.offset))
        if isinstance(source, Arrays):
            n = len(tf.nest.flatten(source.arrays[0])[0])
            order = (
                np.random.default_rng([self.seed, self.epoch]).permutation(n)
                if source.shuffle
                else np.arange(n)
            )
            return (source.batch(order, i) for i in range(self.offset, len(source)))
        if isinstance(source, keras.utils.PyDataset):
            return (source[i] for i in range(self.offset, _py_dataset_length(source)))
        iterator = iter(source())
        for _ in range(self.offset):
            next(iterator)
        return iterator

    def next(self) -> Any:
        if self._iterator is None:
            self._iterator = self._epoch_iterator()
        try:
            batch = next(self._iterator)
        except StopIteration:
            if self.offset == 0:
                raise RuntimeError("the training data produced no batches in an epoch") from None
            self._end_epoch()
            self._iterator = self._epoch_iterator()
            batch = next(self._iterator)
        self.offset += 1
        return batch

    def _end_epoch(self) -> None:
        if isinstance(self.source, keras.utils.PyDataset):
            self.source.on_epoch_end()
        self.epoch += 1
        self.offset = 0

    def state(self) -> dict[str, int]:
        if self._serialized is not None:  # one endless dataset: the offset counts every batch
            return {"epoch": 0, "offset": self.offset, "seed": self.seed}
        return {"epoch": self.epoch, "offset": self.offset, "seed": self.seed}

    def restore(self, state: dict[str, int]) -> None:
        self.seed = int(state["seed"])
        for _ in range(int(state["epoch"])):
            self._end_epoch()  # PyDatasets reshuffle in on_epoch_end
        self.epoch = int(state["epoch"])
        self.offset = int(state["offset"])
        self._iterator = None


def _py_dataset_length(source: keras.utils.PyDataset) -> int:
    length = source.num_batches
    if length is None:
        raise TypeError(f"{type(source).__qualname__}: PEDL needs a PyDataset of finite length (num_batches)")
    return int(length)


def validation_input(source: Any) -> tuple[Any, dict[str, Any]]:
    """The first argument and keywords for `model.evaluate` reading `source` once."""
    if isinstance(source, Arrays):
        x, y, weights = (*source.arrays, None)[:3]
        return x, {"y": y, "sample_weight": weights, "batch_size": source.batch_size}
    if isinstance(source, (tf.data.Dataset, keras.utils.PyDataset)):
        return source, {}
    generator_function: Callable[[], Any] = source
    return generator_function(), {}
