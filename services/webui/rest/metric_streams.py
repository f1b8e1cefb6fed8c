"""Determined's `/api/v1/experiments/.../metrics-stream/*` streams (ExpMetricNames, MetricBatches,
TrialsSnapshot, TrialsSample) as views over one experiment's metric rows.

Each view absorbs the scheduler's `GetMetrics` replies (`absorb`) and says what is new since its
last message (`message`), in Determined's field names; the handlers (`metric_stream_routes`) send
one message when the stored rows are read and then one per reply that brings news. Parsing the
query (`StreamQuery.parse`) and the views are free of the network, so both are tested alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pedl import downsample
from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.metric_reports import GROUPS, metric_group

_METRIC_TYPE = {"METRIC_TYPE_TRAINING": "training", "METRIC_TYPE_VALIDATION": "validation", "1": "training"}
_METRIC_TYPE["2"] = "validation"
_GROUP_OF = {
    scheduler_pb2.METRIC_KIND_TRAINING: "training",
    scheduler_pb2.METRIC_KIND_VALIDATION: "validation",
}
DEFAULT_MAX_TRIALS = 25  # Determined's TrialsSample defaults
DEFAULT_MAX_DATAPOINTS = 1000
_NO_END = 2**63 - 1
# Rows per trial that reading an experiment's metric names asks for (`GetMetrics.max_points`): the cut
# the web UI's curves use, which the scheduler keeps made (`curve_cache`, `cut_curves`), so a names
# read costs a bounded, usually cached, number of rows per trial. The cut keeps each trial's first and
# last row and, for each metric with a number in any row (up to 99 a trial, by name), a row holding
# it (`pedl.downsample.keep`): every metric a column or chart can show has its name in it.
NAME_POINTS = downsample.MAX_POINTS
_STREAM = {"metric_name", "metric_type", "group", "period_seconds"}
KNOWN = {
    "names": {"ids", "period_seconds"},
    "batches": _STREAM,
    "snapshot": _STREAM | {"batches_processed", "batches_margin"},
    "sample": _STREAM | {"max_trials", "max_datapoints", "start_batches", "end_batches"},
}


def _snake(name: str) -> str:
    """grpc-gateway reads a query field in either spelling: `metricName` or `metric_name`."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


@dataclass(frozen=True)
class StreamQuery:
    """One metrics-stream request's parameters, checked once."""

    experiment_ids: list[int]
    metric_name: str = ""
    group: str = ""
    period_seconds: int = 0
    batches_processed: int = 0
    batches_margin: int = 0
    max_trials: int = DEFAULT_MAX_TRIALS
    max_datapoints: int = DEFAULT_MAX_DATAPOINTS
    start_batches: int = 0
    end_batches: int = _NO_END

    @classmethod
    def parse(cls, endpoint: str, params: Mapping[str, Sequence[str]], experiment_id: int = 0) -> StreamQuery:
        """From the query string (name -> values) of `endpoint` (a KNOWN key); one 400 line for what
        pedl cannot answer."""
        values: dict[str, str] = {}
        ids: list[int] = [experiment_id] if experiment_id else []
        for raw, given in params.items():
            name = _snake(raw)
            if name not in KNOWN[endpoint]:
                raise GatewayError(400, f"unknown query parameter {raw[:40]} for this metrics stream")
            if name == "ids":
                ids.extend(_integer("ids", v) for v in given)
            elif given:
                values[name] = given[-1]
        if not ids or not all(0 < i < 2**31 for i in ids):
            raise GatewayError(400, "give ids: the experiment whose metric names to stream")
        if len(set(ids)) > 1:
            raise GatewayError(400, "give one experiment in ids: pedl streams one experiment's metric names")
        query = cls(
            experiment_ids=ids[:1],
            period_seconds=_number(values, "period_seconds", 0),
            batches_margin=_number(values, "batches_margin", 0),
            max_trials=_number(values, "max_trials", 0) or DEFAULT_MAX_TRIALS,
            max_datapoints=_number(values, "max_datapoints", 0) or DEFAULT_MAX_DATAPOINTS,
            start_batches=_number(values, "start_batches", 0),
            end_batches=_number(values, "end_batches", 0) or _NO_END,
        )
        if endpoint == "names":
            return query
        if not values.get("metric_name"):
            raise GatewayError(400, "give metric_name: the metric to stream")
        if endpoint == "snapshot" and "batches_processed" not in values:
            raise GatewayError(400, "give batches_processed: the point of progress to compare trials at")
        return cls(
            **{
                **query.__dict__,
                "metric_name": values["metric_name"],
                "group": _group(values),
                "batches_processed": _number(values, "batches_processed", 0),
            }
        )

    @property
    def kind(self) -> scheduler_pb2.MetricKind.ValueType:
        return GROUPS[self.group]


def _integer(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise GatewayError(400, f"query parameter {name} must be an integer, got {raw[:40]!r}") from None


def _number(values: Mapping[str, str], name: str, default: int) -> int:
    raw = values.get(name)
    if raw is None or raw == "":
        return default
    value = _integer(name, raw)
    if not 0 <= value < 2**31:
        raise GatewayError(400, f"query parameter {name} must be 0 or more, got {value}")
    return value


def _group(values: Mapping[str, str]) -> str:
    group = values.get("group", "")
    if group:
        metric_group(group)  # one 400 for a bad name
        if group not in GROUPS:
            raise GatewayError(400, f"metrics-stream has no custom metric groups: {group[:64]!r}")
        return group
    metric_type = values.get("metric_type", "")
    if metric_type in ("METRIC_TYPE_PROFILING", "3"):
        raise GatewayError(400, "pedl records no profiling metrics: ask for training or validation ones")
    if metric_type not in _METRIC_TYPE:
        raise GatewayError(
            400,
            "give metric_type METRIC_TYPE_TRAINING or METRIC_TYPE_VALIDATION (or group "
            f"training or validation), not {metric_type[:40]!r}",
        )
    return _METRIC_TYPE[metric_type]


@dataclass(frozen=True)
class Row:
    trial_id: int
    group: str
    batches: int
    metrics: dict[str, Any]
    time: str | None


def rows(reply: scheduler_pb2.GetMetricsResponse) -> Iterator[Row]:
    for series in reply.series:
        group = _GROUP_OF.get(series.kind)
        if group is None:
            continue
        for batches, metrics, end in zip(
            series.total_batches, series.metrics_json, series.end_time, strict=False
        ):
            yield Row(series.trial_id, group, batches, json.loads(metrics), end or None)


def trial_ids(reply: scheduler_pb2.GetMetricsResponse) -> set[int]:
    return {s.trial_id for s in reply.series}


def _number_value(value: Any) -> float | None:
    """A metric's value as a float; None for a list, a string or a boolean."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class MetricNames:
    """ExpMetricNamesResponse: the searcher metric, then each (group, name) once, when first stored."""

    def __init__(self, searcher_metric: str) -> None:
        self.searcher_metric = searcher_metric
        self.seen: set[tuple[str, str]] = set()
        self.new: list[tuple[str, str]] = []

    def absorb(self, reply: scheduler_pb2.GetMetricsResponse, hparams: Mapping[int, Any]) -> None:
        for row in rows(reply):
            for name in row.metrics:
                if (row.group, name) not in self.seen:
                    self.seen.add((row.group, name))
                    self.new.append((row.group, name))

    def message(self) -> tuple[dict[str, Any], bool]:
        new, self.new = self.new, []
        return {
            "searcherMetrics": [self.searcher_metric] if self.searcher_metric else [],
            "trainingMetrics": [n for g, n in new if g == "training"],
            "validationMetrics": [n for g, n in new if g == "validation"],
            "metricNames": [{"group": g, "name": n} for g, n in new],
        }, bool(new)


class MetricBatches:
    """MetricBatchesResponse: each count of batches at which the metric was stored, once."""

    def __init__(self, query: StreamQuery) -> None:
        self.query = query
        self.seen: set[int] = set()
        self.new: list[int] = []

    def absorb(self, reply: scheduler_pb2.GetMetricsResponse, hparams: Mapping[int, Any]) -> None:
        for row in rows(reply):
            if row.group == self.query.group and self.query.metric_name in row.metrics:
                if row.batches not in self.seen:
                    self.seen.add(row.batches)
                    self.new.append(row.batches)

    def message(self) -> tuple[dict[str, Any], bool]:
        new, self.new = self.new, []
        return {"batches": new}, bool(new)


class TrialsSnapshot:
    """TrialsSnapshotResponse: each trial's metric at `batches_processed` (± `batches_margin`), each
    stored row once, with the trial's hyperparameters."""

    def __init__(self, query: StreamQuery) -> None:
        self.query = query
        self.new: list[dict[str, Any]] = []

    def absorb(self, reply: scheduler_pb2.GetMetricsResponse, hparams: Mapping[int, Any]) -> None:
        q = self.query
        for row in rows(reply):
            if row.group != q.group or abs(row.batches - q.batches_processed) > q.batches_margin:
                continue
            value = _number_value(row.metrics.get(q.metric_name))
            if value is not None:
                self.new.append(
                    {
                        "trialId": row.trial_id,
                        "hparams": hparams.get(row.trial_id),
                        "metric": value,
                        "batchesProcessed": row.batches,
                    }
                )

    def message(self) -> tuple[dict[str, Any], bool]:
        new, self.new = self.new, []
        return {"trials": new}, bool(new)


class TrialsSample:
    """TrialsSampleResponse: the metric over time for the best `max_trials` trials (by their best
    searcher-metric validation; trials without one after, oldest first). A trial newly among them is
    promoted, with its hyperparameters and its points so far (at most `max_datapoints`, evenly
    spaced); one that drops out is demoted; the others get their new points only (hparams null)."""

    def __init__(self, query: StreamQuery, searcher_metric: str, smaller_is_better: bool) -> None:
        self.query = query
        self.searcher_metric = searcher_metric
        self.smaller_is_better = smaller_is_better
        self.points: dict[int, list[dict[str, Any]]] = {}
        self.best: dict[int, float] = {}
        self.hparams: dict[int, Any] = {}
        self.included: list[int] = []
        self.sent_upto: dict[int, int] = {}

    def absorb(self, reply: scheduler_pb2.GetMetricsResponse, hparams: Mapping[int, Any]) -> None:
        q = self.query
        for row in rows(reply):
            self.hparams.setdefault(row.trial_id, hparams.get(row.trial_id))
            self.points.setdefault(row.trial_id, [])
            if row.group == "validation":
                self._rank(row.trial_id, _number_value(row.metrics.get(self.searcher_metric)))
            value = _number_value(row.metrics.get(q.metric_name))
            if row.group == q.group and value is not None and q.start_batches <= row.batches <= q.end_batches:
                point = {"batches": row.batches, "values": {q.metric_name: value}, "time": row.time}
                self.points[row.trial_id].append(point)

    def _rank(self, trial_id: int, value: float | None) -> None:
        if value is None:
            return
        best = self.best.get(trial_id)
        if best is None or (value < best if self.smaller_is_better else value > best):
            self.best[trial_id] = value

    def _chosen(self) -> list[int]:
        sign = 1.0 if self.smaller_is_better else -1.0
        ranked = sorted(
            self.points,
            key=lambda t: (t not in self.best, sign * self.best.get(t, 0.0), t),
        )
        return ranked[: self.query.max_trials]

    def message(self) -> tuple[dict[str, Any], bool]:
        chosen = self._chosen()
        promoted = [t for t in chosen if t not in self.included]
        demoted = [t for t in self.included if t not in chosen]
        trials = []
        for t in chosen:
            upto = self.sent_upto.get(t, -1) if t not in promoted else -1
            new = sorted((p for p in self.points[t] if p["batches"] > upto), key=lambda p: p["batches"])
            new = [p for i, p in enumerate(new) if i == 0 or p["batches"] != new[i - 1]["batches"]]
            if t in promoted:
                new = _spaced(new, self.query.max_datapoints)
            if new:
                self.sent_upto[t] = new[-1]["batches"]
            if new or t in promoted:
                trials.append(
                    {"trialId": t, "hparams": self.hparams[t] if t in promoted else None, "data": new}
                )
        for t in demoted:
            self.sent_upto.pop(t, None)
        self.included = chosen
        return {"trials": trials, "promotedTrials": promoted, "demotedTrials": demoted}, bool(
            trials or demoted
        )


def _spaced(points: list[dict[str, Any]], most: int) -> list[dict[str, Any]]:
    """At most `most` of `points`, evenly spaced, the last always kept (a chart ends where the trial is)."""
    if len(points) <= most:
        return points
    step = len(points) / most
    picked = [points[int(i * step)] for i in range(most - 1)]
    return [*picked, points[-1]]
