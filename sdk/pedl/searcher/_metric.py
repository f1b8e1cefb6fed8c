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
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetricError(f"validation metric {name!r} must be a number, got {value!r}")
    return float(value)  # NaN and infinities too, as Determined: `is_better` never ranks NaN first


def is_better(value: float, best: float | None, smaller_is_better: bool) -> bool:
    """Whether `value` beats `best` (None: no best yet). NaN never does, so it never becomes a best."""
    if math.isnan(value):
        return False
    if best is None or math.isnan(best):
        return True
    return value < best if smaller_is_better else value > best
