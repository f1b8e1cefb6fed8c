"""A trial's `summaryMetrics` as Determined's master keeps them: per group (`avg_metrics` for
training, `validation_metrics`), per metric its count, min, max, mean, last and type, folded
from every report (GetTrial returns `summaryMetrics`; `det trial describe` and the SDK read it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pedl.metric_summary import fold


def summary_metrics(
    training: Iterable[Mapping[str, Any]],
    validation: Iterable[Mapping[str, Any]],
    groups: Mapping[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Determined's shape: a group appears only once it has a report; custom groups (`groups`, as
    the scheduler folded them) under their own names."""
    out: dict[str, Any] = {}
    for key, reports in (("avg_metrics", training), ("validation_metrics", validation)):
        folded = fold(reports)
        if folded:
            out[key] = folded
    return out | dict(groups or {})
