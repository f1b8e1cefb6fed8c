"""`det.pytorch.samplers`: the sampler wrappers Determined documents for building a DataLoader by
hand (Core API scripts, custom loaders): shard across workers, skip what was already trained on
after a resume, repeat, or shuffle reproducibly. Each wraps any sampler or batch sampler."""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any

import numpy as np
import torch.utils.data


class ReproducibleShuffleSampler(torch.utils.data.Sampler):
    """A shuffle of range(len(data_source)) drawn from `seed`: the same order on every run; each
    new pass (epoch) draws the next permutation from the same generator."""

    def __init__(self, data_source: Sized, seed: int) -> None:
        self._length = len(data_source)
        self._rng = np.random.RandomState(seed)

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[int]:
        return iter(int(i) for i in self._rng.permutation(self._length))


class _Wrapper(torch.utils.data.Sampler):
    def __init__(self, inner: Any) -> None:
        self.inner = inner


class RepeatSampler(_Wrapper):
    """Repeats the inner sampler without end (each pass a new iteration of it)."""

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[Any]:
        while True:
            yield from self.inner


class SkipSampler(_Wrapper):
    """Leaves out the first `skip` items of the inner sampler (those trained on before a resume)."""

    def __init__(self, inner: Any, skip: int) -> None:
        super().__init__(inner)
        self.skip = skip

    def __len__(self) -> int:
        return max(len(self.inner) - self.skip, 0)

    def __iter__(self) -> Iterator[Any]:
        items = iter(self.inner)
        for _ in range(self.skip):
            if next(items, _END) is _END:
                return
        yield from items


class DistributedSampler(_Wrapper):
    """This worker's share: items rank, rank + num_workers, rank + 2*num_workers, ..."""

    def __init__(self, inner: Any, num_workers: int, rank: int) -> None:
        super().__init__(inner)
        if not 0 <= rank < num_workers:
            raise ValueError(f"DistributedSampler: rank {rank} is not in 0..{num_workers - 1}")
        self.num_workers = num_workers
        self.rank = rank

    def __len__(self) -> int:
        return len(range(self.rank, len(self.inner), self.num_workers))

    def __iter__(self) -> Iterator[Any]:
        for index, item in enumerate(self.inner):
            if index % self.num_workers == self.rank:
                yield item


# The batch-sampler forms act on whole batches the same way.
RepeatBatchSampler = RepeatSampler
SkipBatchSampler = SkipSampler
DistributedBatchSampler = DistributedSampler

_END = object()

__all__ = [
    "DistributedBatchSampler",
    "DistributedSampler",
    "RepeatBatchSampler",
    "RepeatSampler",
    "ReproducibleShuffleSampler",
    "SkipBatchSampler",
    "SkipSampler",
]
