"""Keras training data as an endless stream of batches with a restorable position.

Sources: a batched `tf.data.Dataset`, a `keras.utils.PyDataset` (or Sequence), a generator
function (called once per epoch), NumPy arrays `(x, y)` / `(x, y, sample_weight)` batched
here, or a started generator (`Replayed`). A resumed trial re-creates the source and moves to the
saved (epoch, offset): datasets replay their own seeded order, arrays are shuffled per epoch
from a seed kept in the state, started generators are redrawn (`pedl.keras._replay`).

On several workers each reads a `Shard`: every worker draws the same batch order (the same seed)
and takes every N-th batch of it from its index, so the shards are disjoint and the position
(epoch, offset) is the same on every worker. The training epochs of arrays, PyDatasets and
generators end with a last round padded with the epoch's first batches, so all workers have as
many; a tf.data.Dataset is repeated first and then sharded, so its stream never ends. Validation
shards are not padded.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from pedl._shards import round_robin
from pedl.keras._replay import Replayed, ReplayLog, is_started_generator
from pedl.tensorflow import _datasets

# Keras 3's PyDataset; Keras 2 (TensorFlow <= 2.15) names the same protocol Sequence.
PyDataset: Any = getattr(keras.utils, "PyDataset", None) or keras.utils.Sequence

ACCEPTED = (
    "a batched tf.data.Dataset, a keras.utils.PyDataset, a generator function (called once per epoch), "
    "a started endless generator (training data only; resumed by replay, see pedl.keras._replay), "
    "or a tuple of NumPy arrays (x, y) or (x, y, sample_weight)"
)


@dataclass(frozen=True)
class Shard:
    """Worker `index` of `count`: batches index, index + count, index + 2 * count, ... of an epoch."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"worker index {self.index} is not in [0, {self.count})")

    def batches(self, n: int, pad: bool) -> list[int]:
        """This worker's batch numbers of an epoch of `n`; with `pad`, ceil(n / count) of them."""
        own = list(range(self.index, n, self.count))
        last = n % self.count
        if pad and last and self.index >= last:
            own.append((self.index - last) % min(n, self.count))
        return own


def shard_items(items: Iterator[Any], shard: Shard, pad: bool) -> Iterator[Any]:
    """`Shard.batches` of an iterator whose length is known only at its end."""
    return round_robin(items, shard.count, shard.index, pad)


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
    if isinstance(source, (tf.data.Dataset, PyDataset)):
        return source
    if is_started_generator(source) and role == "training":
        return Replayed(source, role, origin, ReplayLog())
    if inspect.isgenerator(source) or (isinstance(source, Iterator) and not callable(source)):
        raise TypeError(
            f"{origin}: the {role} data is an already started generator, which cannot be read once per "
            "validation; return the generator function itself (PEDL calls it for every pass)"
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
        return (*batch, None, None)[:3]
    return batch, None, None


def batch_length(x: Any) -> int:
    flat = tf.nest.flatten(x)
    if not flat:
        return 0
    shape = getattr(flat[0], "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else 1


class TrainingStream:
    def __init__(self, source: Any, seed: int, shard: Shard | None = None) -> None:
        self.source = source
        self.seed = seed  # for shuffling arrays
        self.shard = shard
        self.epoch = 0
        self.offset = 0  # batches taken from the current epoch (of this worker's shard)
        self._iterator: Iterator[Any] | None = None
        self._serialized: bytes | None = None
        if isinstance(source, tf.data.Dataset):
            self._serialized = _datasets.serialize(source, "the training dataset")

    def _own(self, n: int) -> list[int]:
        return list(range(n)) if self.shard is None else self.shard.batches(n, pad=True)

    def _epoch_iterator(self) -> Iterator[Any]:
        source, shard = self.source, self.shard
        if self._serialized is not None:
            # A fresh copy replays the dataset's seeded order; its epochs are reshuffled by repeat().
            dataset = _datasets.from_serialized(self._serialized, source.element_spec).repeat()
            if shard is not None:
                dataset = dataset.shard(shard.count, shard.index)
            return iter(dataset.skip(self.offset))
        if isinstance(source, Arrays):
            n = len(tf.nest.flatten(source.arrays[0])[0])
            order = (
                np.random.default_rng([self.seed, self.epoch]).permutation(n)
                if source.shuffle
                else np.arange(n)
            )
            return (source.batch(order, i) for i in self._own(len(source))[self.offset :])
        if isinstance(source, PyDataset):
            return (source[i] for i in self._own(_py_dataset_length(source))[self.offset :])
        iterator = iter(source())
        if shard is not None:
            iterator = shard_items(iterator, shard, pad=True)
        return itertools.islice(iterator, self.offset, None)

    def sample(self) -> Any:
        """What the next batch looks like, leaving the stream as it is: a batch, or for a
        tf.data.Dataset its element spec (iterating another copy would advance its shuffle seeds)."""
        if self._serialized is not None:
            return self.source.element_spec
        if isinstance(self.source, Replayed):
            return self.source.peek()
        try:
            return next(self._epoch_iterator())
        except StopIteration:
            raise RuntimeError("the training data produced no batches in an epoch") from None

    def _next_replayed(self, source: Replayed) -> Any:
        # Every worker draws the same stream (same seed) and keeps its own of each `count` batches.
        batches = source.take(1 if self.shard is None else self.shard.count)
        self.offset += 1
        if source.steps and self.offset == source.steps:  # epochs of steps_per_epoch batches
            self.epoch, self.offset = self.epoch + 1, 0
        return batches[0 if self.shard is None else self.shard.index]

    def next(self) -> Any:
        if isinstance(self.source, Replayed):
            return self._next_replayed(self.source)
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
        if isinstance(self.source, PyDataset):
            self.source.on_epoch_end()
        self.epoch += 1
        self.offset = 0

    def state(self) -> dict[str, int]:
        if self._serialized is not None:  # one endless dataset: the offset counts every batch
            return {"epoch": 0, "offset": self.offset, "seed": self.seed}
        return {"epoch": self.epoch, "offset": self.offset, "seed": self.seed}

    def restore(self, state: dict[str, int]) -> None:
        self.seed = int(state["seed"])
        if isinstance(self.source, Replayed):  # the generator itself is replayed by _replay.restore
            self.epoch, self.offset = int(state["epoch"]), int(state["offset"])
            return
        for _ in range(int(state["epoch"])):
            self._end_epoch()  # PyDatasets reshuffle in on_epoch_end
        self.epoch = int(state["epoch"])
        self.offset = int(state["offset"])
        self._iterator = None


def _py_dataset_length(source: Any) -> int:
    length = source.num_batches if hasattr(source, "num_batches") else len(source)  # Keras 2: len()
    if length is None:
        raise TypeError(f"{type(source).__qualname__}: PEDL needs a PyDataset of finite length (num_batches)")
    return int(length)


def validation_input(source: Any) -> tuple[Any, dict[str, Any]]:
    """The first argument and keywords for `model.evaluate` reading `source` once."""
    if isinstance(source, Arrays):
        x, y, weights = (*source.arrays, None)[:3]
        return x, {"y": y, "sample_weight": weights, "batch_size": source.batch_size}
    if isinstance(source, (tf.data.Dataset, PyDataset)):
        return source, {}
    if isinstance(source, Replayed):  # validation_steps batches, drawn on from the last pass
        assert source.steps is not None
        batches = source.take(source.steps)
        return (b for b in batches), {"steps": len(batches)}
    generator_function: Callable[[], Any] = source
    return generator_function(), {}


def validation_batches(source: Any, shard: Shard) -> Iterator[Any]:
    """This worker's batches of one pass over the validation data (not padded: an exact partition)."""
    if isinstance(source, Arrays):
        order = np.arange(len(tf.nest.flatten(source.arrays[0])[0]))
        return (source.batch(order, i) for i in shard.batches(len(source), pad=False))
    if isinstance(source, tf.data.Dataset):
        return iter(source.shard(shard.count, shard.index))
    if isinstance(source, PyDataset):
        return (source[i] for i in shard.batches(_py_dataset_length(source), pad=False))
    if isinstance(source, Replayed):
        assert source.steps is not None
        return shard_items(iter(source.take(source.steps)), shard, pad=False)
    generator_function: Callable[[], Any] = source
    return shard_items(iter(generator_function()), shard, pad=False)
