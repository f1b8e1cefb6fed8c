"""determined.pytorch.DataLoader and the length units of Trainer.fit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pedl.pytorch._data import DataLoader as _PedlDataLoader


class DataLoader(_PedlDataLoader):
    """Takes torch.utils.data.DataLoader's arguments; pedl shards it across slots itself."""

    def get_data_loader(self, repeat: bool = False, num_replicas: int = 1, rank: int = 0) -> DataLoader:
        if repeat or num_replicas != 1 or rank != 0:
            raise ValueError(
                "get_data_loader(): pedl repeats and shards data loaders itself; call it without arguments"
            )
        return self


@dataclass(frozen=True)
class Batch:
    """A length in batches (Trainer.fit's max_length, validation_period, checkpoint_period)."""

    value: int


@dataclass(frozen=True)
class Epoch:
    """A length in epochs of the training data loader."""

    value: int


def to_batches(length: Any, batches_per_epoch: int, what: str) -> int:
    value = getattr(length, "value", None)
    if isinstance(length, (Batch, Epoch)) and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{what} must be Batch(n) or Epoch(n) with one int n, got {length!r}")
    if isinstance(length, Batch):
        return int(length.value)
    if isinstance(length, Epoch):
        return int(length.value) * batches_per_epoch
    raise TypeError(f"{what} must be determined.pytorch.Batch(n) or Epoch(n), got {length!r}")
