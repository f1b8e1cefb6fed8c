"""Metric histories from the cluster as plain records, with `.to_pandas()` where pandas is installed.

exp = get_experiment(7)
df = exp.metrics(kind="validation").to_pandas()   # one row per validation, a column per metric
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pedl import records
from pedl._metrics import GROUP_NAME
from pedl.v1 import scheduler_pb2

KINDS = {
    None: scheduler_pb2.METRIC_KIND_UNSPECIFIED,
    "training": scheduler_pb2.METRIC_KIND_TRAINING,
    "validation": scheduler_pb2.METRIC_KIND_VALIDATION,
}


class Metrics(list):
    """Records {"trial_id", "kind", "total_batches", "metrics", "end_time"} in (kind, trial, batches)
    order as the scheduler sent them; a list, so it prints, slices and serializes as one."""

    def to_pandas(self) -> Any:
        """A DataFrame: trial_id, kind, total_batches, end_time, then one column per metric name."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("Metrics.to_pandas() needs pandas: pip install pandas") from e
        rows = [{k: v for k, v in r.items() if k != "metrics"} | dict(r["metrics"]) for r in self]
        columns = ["trial_id", "kind", "total_batches", "end_time"]
        return pandas.DataFrame(rows, columns=columns + sorted({k for r in self for k in r["metrics"]}))


def request(
    *, trial_id: int | None = None, experiment_id: int | None = None, kind: str | None, from_batches: int
) -> scheduler_pb2.GetMetricsRequest:
    """`kind`: "training", "validation", None (both), or a custom metric group's name."""
    if kind not in KINDS and (not isinstance(kind, str) or not GROUP_NAME.fullmatch(kind)):
        raise ValueError(
            f"kind must be 'training', 'validation', None (both) or a metric group, got {kind!r}"
        )
    if isinstance(from_batches, bool) or not isinstance(from_batches, int) or from_batches < 0:
        raise ValueError(f"from_batches must be an integer >= 0, got {from_batches!r}")
    target = {"trial_id": trial_id} if trial_id is not None else {"experiment_id": experiment_id}
    if kind is not None and kind not in KINDS:  # a custom group's rows
        return scheduler_pb2.GetMetricsRequest(**target, group=kind, from_batches=from_batches)
    return scheduler_pb2.GetMetricsRequest(**target, kind=KINDS[kind], from_batches=from_batches)


def collect(responses: Iterable[scheduler_pb2.GetMetricsResponse]) -> Metrics:
    out = Metrics()
    for response in responses:
        for series in response.series:
            out.extend(records.metric_records(series))
    return out
