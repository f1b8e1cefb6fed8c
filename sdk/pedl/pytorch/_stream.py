"""Training batches cycling over epochs, with a position that a checkpoint can restore.

A resumed trial must see the same batches in the same order as an uninterrupted one. The
order of an epoch is drawn from the RNGs when its iterator is created, so the stream keeps
the RNG states of that moment; restoring re-creates the iterator under them and skips the
batches already trained.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils.data
from torch.utils.data.dataloader import _SingleProcessDataLoaderIter

from pedl.pytorch import _rng


class EpochStream:
    def __init__(self, loader: torch.utils.data.DataLoader) -> None:
        self.loader = loader
        self.epoch = 0
        self.offset = 0  # batches taken from the current epoch
        self._iterator: Any = None
        self._epoch_start: dict[str, Any] | None = None
        # len() is exact only for map-style datasets; IterableDataset epochs end on StopIteration.
        self._epoch_len: int | None = None
        if not isinstance(loader.dataset, torch.utils.data.IterableDataset):
            self._epoch_len = len(loader)

    def _snapshot(self) -> dict[str, Any]:
        # Taken every epoch, saved only with a checkpoint: `state()` makes it plain data.
        return {
            "rng": _rng.capture(plain=False),
            "generators": [g.get_state() for g in _rng.loader_generators(self.loader)],
        }

    def _apply(self, snapshot: dict[str, Any]) -> None:
        _rng.restore(snapshot["rng"])
        for gen, state in zip(_rng.loader_generators(self.loader), snapshot["generators"], strict=False):
            gen.set_state(state)

    def _start_epoch(self) -> None:
        self._epoch_start = self._snapshot()
        self._iterator = iter(self.loader)
        self.offset = 0

    def _end_epoch(self) -> None:
        self._iterator = None
        self._epoch_start = None
        self.epoch += 1
        self.offset = 0

    def next(self) -> Any:
        if self._iterator is None:
            self._start_epoch()
        try:
            batch = next(self._iterator)
        except StopIteration:
            empty = self.offset == 0
            self._end_epoch()
            if empty:
                raise RuntimeError("the training data loader produced no batches in an epoch") from None
            self._start_epoch()
            batch = next(self._iterator)
        self.offset += 1
        if self.offset == self._epoch_len:
            self._end_epoch()
        return batch

    def state(self) -> dict[str, Any]:
        start = self._epoch_start
        return {
            "epoch": self.epoch,
            "offset": self.offset,
            "epoch_start": None if start is None else {**start, "rng": _rng.as_plain(start["rng"])},
            "generators": [g.get_state() for g in _rng.loader_generators(self.loader)],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Puts the stream where `state` was; the caller restores the current RNG states after."""
        self._iterator = None
        self._epoch_start = None
        self.epoch = int(state["epoch"])
        self.offset = 0
        if state["epoch_start"] is not None:
            self._apply(state["epoch_start"])
            self._epoch_start = state["epoch_start"]
            self._iterator = iter(self.loader)
            self._skip(int(state["offset"]))
        for gen, gen_state in zip(_rng.loader_generators(self.loader), state["generators"], strict=False):
            gen.set_state(gen_state)

    def _skip(self, count: int) -> None:
        it = self._iterator
        cheap = isinstance(it, _SingleProcessDataLoaderIter) and self._epoch_len is not None
        for _ in range(count):
            if cheap:
                it._next_index()  # draws from the sampler without loading the data
                it._num_yielded += 1
            else:
                next(it)
            self.offset += 1
