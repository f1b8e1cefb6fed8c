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
        for name, value in metrics.items():
            if isinstance(value, torch.Tensor):
                value = value.detach()
            self._values.setdefault(name, []).append(value)
        self.batches += 1

    def result(self) -> dict[str, Any]:
        return {name: _mean(name, values, self._what) for name, values in self._values.items()}


def _mean(name: str, values: list[Any], what: str) -> Any:
    try:
        if all(isinstance(v, torch.Tensor) for v in values):
            return to_plain(torch.stack([v.to(torch.float64) for v in values]).mean(dim=0))
        return to_plain(np.mean(np.asarray([to_plain(v) for v in values], dtype=np.float64), axis=0))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{what}: metric {name!r} cannot be averaged over batches: {exc}") from exc


def first_non_finite(losses: Iterable[torch.Tensor]) -> int | None:
    """Index of the first non-finite loss, checked with one device sync for the whole step."""
    stacked = torch.stack(list(losses))
    bad = (~torch.isfinite(stacked)).nonzero()
    return int(bad[0, 0]) if bad.numel() else None
