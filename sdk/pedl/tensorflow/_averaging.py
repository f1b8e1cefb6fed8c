"""Means of per-batch metric values (numpy arrays from `Session.run` or Keras)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pedl._metrics import to_plain


def mean_metrics(batches: list[dict[str, Any]], what: str) -> dict[str, Any]:
    """Each metric's mean over the batches, as plain floats (or nested lists for arrays)."""
    if not batches:
        return {}
    out: dict[str, Any] = {}
    for name in batches[0]:
        try:
            values = np.asarray([np.asarray(b[name], dtype=np.float64) for b in batches])
            out[name] = to_plain(values.mean(axis=0))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}: metric {name!r} cannot be averaged over batches: {exc}") from exc
    return out


def first_non_finite(values: list[Any]) -> int | None:
    """Index of the first value that is not finite."""
    for index, value in enumerate(values):
        if not np.all(np.isfinite(np.asarray(value, dtype=np.float64))):
            return index
    return None
