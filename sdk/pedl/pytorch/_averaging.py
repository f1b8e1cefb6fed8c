"""Averaging per-batch metrics without a device sync per batch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from pedl._metrics import to_plain


class MetricAverager:
    """Collects metric dicts batch by batch; `result()` gives their means as plain values."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._values: dict[str, list[Any]] = {}
        self.batches = 0

    def add(self, metrics: dict[str, Any]) -> None:
        if not isinstance(metrics, dict):
            raise TypeError(f"{self._what} must return a dict of metrics, got {type(metrics).__name__}")
        values = self._values
        for name, value in metrics.items():
            # Only a tensor in a graph needs detaching (to free the graph); training_metrics() runs
            # under no_grad, where detaching would just make another alias of the same data.
            if isinstance(value, torch.Tensor) and value.requires_grad:
                value = value.detach()
            if name in values:
                values[name].append(value)
            else:
                values[name] = [value]
        self.batches += 1

    def result(self) -> dict[str, Any]:
        return {name: _mean(name, values, self._what) for name, values in self._values.items()}


def float64_stack(values: list[Any]) -> torch.Tensor | None:
    """The tensors of `values` stacked as float64 (None if some value is not a tensor).

    Tensors of one dtype are stacked first and converted once: float64 holds every value of the
    narrower types exactly, so this equals converting each value. Mixed dtypes are converted one
    by one (stacking would promote them to a common type that may round, e.g. int64 into float32).
    """
    dtype = None
    mixed = False
    for value in values:
        if not isinstance(value, torch.Tensor):
            return None
        if dtype is None:
            dtype = value.dtype
        elif value.dtype != dtype:
            mixed = True
    if mixed:
        return torch.stack([v.to(torch.float64) for v in values])
    return torch.stack(values).to(torch.float64)


def _mean(name: str, values: list[Any], what: str) -> Any:
    try:
        stacked = float64_stack(values)
        if stacked is not None:
            return to_plain(stacked.mean(dim=0))
        return to_plain(np.mean(np.asarray([to_plain(v) for v in values], dtype=np.float64), axis=0))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{what}: metric {name!r} cannot be averaged over batches: {exc}") from exc


def first_non_finite(losses: Iterable[torch.Tensor] | torch.Tensor) -> int | None:
    """Index of the first non-finite loss, checked with one device sync for the whole step.

    `losses` may already be stacked (the controller stacks them once for the mean as well)."""
    stacked = losses if isinstance(losses, torch.Tensor) else torch.stack(list(losses))
    finite = torch.isfinite(stacked)
    if bool(finite.all()):
        return None
    return int((~finite).nonzero()[0, 0])
