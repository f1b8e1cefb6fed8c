"""Each metric's summary over a series of reports, as Determined's master keeps a trial's
`summaryMetrics`: count and last, and for numbers min, max, mean and sum (NaN sticks, as Go's min
and max). One fold for the REST API's summaryMetrics and the scheduler's custom metric groups."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Fold:
    """One metric's running figures; `numeric` stays True while every value is a number."""

    count: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    last: Any = None
    numeric: bool = True
    kinds: set[str] = field(default_factory=set)

    def add(self, value: Any) -> None:
        self.count += 1
        self.last = value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.numeric = False
            self.kinds.add(_kind(value))
            return
        self.total += value
        if math.isnan(value) or math.isnan(self.low):  # as Determined's (Go's) min and max: NaN sticks
            self.low = self.high = math.nan
        else:
            self.low, self.high = min(self.low, value), max(self.high, value)

    def summary(self) -> dict[str, Any]:
        if not self.numeric:
            kind = self.kinds.pop() if len(self.kinds) == 1 else "string"
            return {"count": self.count, "last": self.last, "type": kind}
        return {
            "count": self.count,
            "min": self.low,
            "max": self.high,
            "mean": self.total / self.count,
            "sum": self.total,
            "last": self.last,
            "type": "number",
        }


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else "object"


def fold(reports: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each metric's summary over `reports` (oldest first), by metric name."""
    folds: dict[str, _Fold] = {}
    for report in reports:
        for name, value in report.items():
            folds.setdefault(name, _Fold()).add(value)
    return {name: f.summary() for name, f in folds.items()}
