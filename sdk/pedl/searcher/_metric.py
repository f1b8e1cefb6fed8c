"""The searcher metric out of a trial's validation metrics; shared by the scheduler and local mode."""

from __future__ import annotations

import math
from typing import Any


class MetricError(ValueError):
    """The trial's validation metrics cannot answer the searcher."""


def searcher_metric(metrics: dict[str, Any], name: str) -> float:
    if name not in metrics:
        reported = ", ".join(sorted(metrics)) or "none"
        raise MetricError(
            f"searcher.metric {name!r} is not among the validation metrics the trial reported ({reported})"
        )
    value = metrics[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise MetricError(f"validation metric {name!r} must be a finite scalar, got {value!r}")
    return float(value)


def is_better(value: float, best: float | None, smaller_is_better: bool) -> bool:
    if best is None:
        return True
    return value < best if smaller_is_better else value > best
