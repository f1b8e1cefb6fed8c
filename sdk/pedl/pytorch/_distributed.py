"""Data-parallel pieces of the PyTorch controller: data shards, DDP, metrics reduced across ranks.

They apply only when torch.distributed has a process group of more than one process (the harness
creates one for `slots_per_trial > 1`); without one the controller stays a plain single process.

Semantics across N ranks:
- The data loader's batch size is per slot: one training "batch" of a step is one batch on every
  rank, so a step of B batches trains B * N loader batches (`num_batches` counts B, the global
  steps; `num_inputs` counts the samples of all ranks).
- Every rank draws the same batch order (the same seed, the same RNG use) and takes every N-th
  batch of it, starting at its rank: the shards are disjoint, and the data position
  (epoch, offset) is the same on every rank. The last round of a training epoch is padded with
  the epoch's first batches so that all ranks have as many batches; validation is not padded.
- Metrics are averaged over the batches of all ranks together, as if one process had run them.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator, Sized
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
import torch.distributed as dist
import torch.utils.data

from pedl._metrics import to_plain
from pedl._shards import round_robin
from pedl.pytorch._averaging import MetricAverager, float64_stack


@dataclass(frozen=True)
class Ranks:
    """This process's place in the trial's process group; `group` carries Python objects (gloo)."""

    rank: int
    world_size: int
    group: Any

    @property
    def is_chief(self) -> bool:
        return self.rank == 0


_object_groups: dict[int, Any] = {}


def current() -> Ranks | None:
    """The process group's ranks, or None for a single process (no group, or a group of one)."""
    if not dist.is_available() or not dist.is_initialized():
        return None
    world_size = dist.get_world_size()
    if world_size <= 1:
        return None
    return Ranks(dist.get_rank(), world_size, _object_group())


def _object_group() -> Any:
    # Objects travel over gloo: with NCCL as the default backend a gloo group is made once
    # (new_group is collective: every rank builds its controller at the same point).
    if dist.get_backend() == "gloo":
        return None
    key = id(dist.group.WORLD)
    if key not in _object_groups:
        _object_groups[key] = dist.new_group(backend="gloo")
    return _object_groups[key]


def gather(ranks: Ranks, obj: Any) -> list[Any]:
    """Every rank's `obj`, indexed by rank, on every rank."""
    out: list[Any] = [None] * ranks.world_size
    dist.all_gather_object(out, obj, group=ranks.group)
    return out


# --- the model ----------------------------------------------------------------------------------


def wrap_model(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """DistributedDataParallel around `model` (its parameters start equal to rank 0's)."""
    from torch.nn.parallel import DistributedDataParallel

    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return DistributedDataParallel(model, device_ids=[index], output_device=index)
    return DistributedDataParallel(model)


# --- data shards --------------------------------------------------------------------------------


class ShardSampler(torch.utils.data.Sampler):
    """Rank r's items of another (batch) sampler: items r, r+N, r+2N, ... of each epoch's order.

    With `pad`, a last partial round is completed with the epoch's first items, so every rank
    yields ceil(len / N) items; without it the shards are an exact partition.
    """

    def __init__(self, inner: Iterable[Any], rank: int, world_size: int, pad: bool) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, {world_size})")
        self.inner = inner
        self.rank = rank
        self.world_size = world_size
        self.pad = pad
        # _rng.loader_generators finds the shuffling generator here (the loader's own sampler is
        # replaced by this one).
        self.generator = getattr(inner, "generator", None) or getattr(
            getattr(inner, "sampler", None), "generator", None
        )

    def __iter__(self) -> Iterator[Any]:
        return round_robin(self.inner, self.world_size, self.rank, self.pad)

    def __len__(self) -> int:
        n = len(cast(Sized, self.inner))  # a sampler without __len__ raises TypeError, as unwrapped
        if self.pad:
            return math.ceil(n / self.world_size)
        return n // self.world_size + (1 if self.rank < n % self.world_size else 0)


def shard_loader(loader: torch.utils.data.DataLoader, ranks: Ranks, pad: bool) -> torch.utils.data.DataLoader:
    """The same loader reading only this rank's shard (a new loader: torch's cannot be re-sampled).

    A loader over an IterableDataset has no sampler to shard: it is returned as it is and its
    dataset must shard itself (e.g. by `torch.distributed.get_rank()`).
    """
    if isinstance(loader.dataset, torch.utils.data.IterableDataset):
        print(
            "pedl: the data loader reads an IterableDataset, which pedl cannot shard across slots; "
            "every rank reads all of it unless the dataset shards itself by torch.distributed.get_rank()",
            file=sys.stderr,
        )
        return loader
    options: dict[str, Any] = {
        "num_workers": loader.num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
        "generator": loader.generator,
        "persistent_workers": loader.persistent_workers,
        "pin_memory_device": loader.pin_memory_device,
    }
    if loader.num_workers > 0:
        options["prefetch_factor"] = loader.prefetch_factor
    if hasattr(loader, "in_order"):
        options["in_order"] = loader.in_order
    if loader.batch_sampler is not None:
        sharded = ShardSampler(loader.batch_sampler, ranks.rank, ranks.world_size, pad)
        return torch.utils.data.DataLoader(loader.dataset, batch_sampler=sharded, **options)
    sharded = ShardSampler(loader.sampler, ranks.rank, ranks.world_size, pad)
    return torch.utils.data.DataLoader(loader.dataset, batch_size=None, sampler=sharded, **options)


# --- metrics ------------------------------------------------------------------------------------


def _sum(name: str, values: list[Any], what: str) -> np.ndarray:
    try:
        stacked = float64_stack(values)
        if stacked is not None:
            return stacked.sum(dim=0).cpu().numpy()
        return np.sum(np.asarray([to_plain(v) for v in values], dtype=np.float64), axis=0)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{what}: metric {name!r} cannot be averaged over batches: {exc}") from exc


class ShardAverager(MetricAverager):
    """A MetricAverager whose `reduce()` averages over the batches of every rank."""

    def sums(self) -> dict[str, tuple[np.ndarray, int]]:
        return {name: (_sum(name, values, self._what), len(values)) for name, values in self._values.items()}


def reduce_means(
    ranks: Ranks, sums: dict[str, tuple[np.ndarray, int]], extra: Any = None
) -> tuple[dict[str, Any], int, list[Any]]:
    """(means over all ranks' batches, the most batches behind any metric, every rank's `extra`).

    One collective per call: per-rank sums and counts of each metric are gathered and merged.
    """
    gathered = gather(ranks, (sums, extra))
    totals: dict[str, tuple[np.ndarray, int]] = {}
    for rank_sums, _ in gathered:
        for name, (total, count) in rank_sums.items():
            if name in totals:
                prev, prev_count = totals[name]
                if np.shape(prev) != np.shape(total):
                    raise ValueError(
                        f"metric {name!r} has shape {np.shape(prev)} on one rank "
                        f"and {np.shape(total)} on another"
                    )
                totals[name] = (prev + total, prev_count + count)
            else:
                totals[name] = (np.asarray(total, dtype=np.float64), count)
    means = {name: to_plain(total / count) for name, (total, count) in totals.items()}
    batches = max((count for _, count in totals.values()), default=0)
    return means, batches, [e for _, e in gathered]
