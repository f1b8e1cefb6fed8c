"""Determined's `GET /api/v1/trials/time-series` (CompareTrials): trials' training, validation and
custom groups' metrics side by side, each group downsampled by the scheduler (`GetMetrics.max_points`,
which keeps every metric's peaks and dips) and cut to the metrics asked for.

The query is parsed once (`TimeSeriesQuery.parse`) and the points shaped (`downsampled`) without the
network, so both are tested alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError, error_of
from pedl_webui.rest.common import Caller, caller, ok
from pedl_webui.rest.metric_reports import GROUPS, Kind, metric_group
from pedl_webui.rest.trials import _trial, trial_value

MAX_TRIALS = 100  # trials in one request
_METRIC_TYPE = {"METRIC_TYPE_TRAINING": "training", "METRIC_TYPE_VALIDATION": "validation"}
_TYPE_OF = {"training": "METRIC_TYPE_TRAINING", "validation": "METRIC_TYPE_VALIDATION"}
_NO_END = 2**63 - 1


@dataclass(frozen=True)
class TimeSeriesQuery:
    trial_ids: list[int]
    # group -> the metric names asked for in it (empty: all of the group's metrics), in asked order.
    groups: dict[str, list[str]] = field(default_factory=dict)
    max_points: int = 0  # 0: every point
    start_batches: int = 0
    end_batches: int = _NO_END

    @classmethod
    def parse(cls, params: Mapping[str, Sequence[str]]) -> TimeSeriesQuery:
        """From the query string (name -> its values); one 400 line for what pedl cannot answer."""
        known = {
            "trialIds", "maxDatapoints", "metricNames", "startBatches", "endBatches", "metricType",
            "group", "metricIds",
        }  # fmt: skip
        for name in params:
            if name.startswith("timeSeriesFilter"):
                raise GatewayError(400, f"pedl does not filter time series by value ({name})")
            if name not in known:
                raise GatewayError(400, f"unknown query parameter {name[:40]}")
        ids = [_integer(params, "trialIds", v) for v in params.get("trialIds", [])]
        if not ids or not all(0 < i < 2**31 for i in ids):
            raise GatewayError(400, "give trialIds: one or more trial ids")
        if len(ids) > MAX_TRIALS:
            raise GatewayError(400, f"at most {MAX_TRIALS} trialIds in one request, got {len(ids)}")
        groups: dict[str, list[str]] = {}
        for metric_id in params.get("metricIds", []):
            group, dot, name = metric_id.partition(".")
            if not dot or not name:
                raise GatewayError(400, f"metricIds must be group.metric_name, got {metric_id[:40]!r}")
            metric_group(group)
            groups.setdefault(group, []).append(name)
        group = _group(params)
        names = [n for n in params.get("metricNames", []) if n]
        if names or group:
            chosen = group or "training"
            groups.setdefault(chosen, []).extend(n for n in names if n not in groups[chosen])
        if not groups:
            raise GatewayError(400, "give metricIds (group.metric_name) or metricNames with a group")
        end = _integer(params, "endBatches", _first(params, "endBatches") or "0")
        return cls(
            trial_ids=list(dict.fromkeys(ids)),
            groups=groups,
            max_points=_integer(params, "maxDatapoints", _first(params, "maxDatapoints") or "0"),
            start_batches=_integer(params, "startBatches", _first(params, "startBatches") or "0"),
            end_batches=end or _NO_END,
        )

    def asks(self) -> list[tuple[Kind, str]]:
        """What to ask GetMetrics for, one call each: training and validation in one (one kind, or
        both), then each custom group asked alone."""
        builtin = [g for g in self.groups if g in GROUPS]
        calls: list[tuple[Kind, str]] = []
        if builtin:
            calls.append(
                (GROUPS[builtin[0]] if len(builtin) == 1 else scheduler_pb2.METRIC_KIND_UNSPECIFIED, "")
            )
        calls.extend((scheduler_pb2.METRIC_KIND_UNSPECIFIED, g) for g in self.groups if g not in GROUPS)
        return calls


def _first(params: Mapping[str, Sequence[str]], name: str) -> str:
    values = params.get(name) or [""]
    return values[0]


def _integer(params: Mapping[str, Sequence[str]], name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise GatewayError(400, f"query parameter {name} must be an integer, got {raw[:40]!r}") from None
    if value < 0:
        raise GatewayError(400, f"query parameter {name} must be 0 or more, got {value}")
    return value


def _group(params: Mapping[str, Sequence[str]]) -> str:
    group = _first(params, "group")
    if group:
        metric_group(group)
        return group
    metric_type = _first(params, "metricType")
    if metric_type in ("", "METRIC_TYPE_UNSPECIFIED"):
        return ""
    if metric_type not in _METRIC_TYPE:
        wanted = " or ".join(_METRIC_TYPE)
        raise GatewayError(400, f"metricType must be {wanted}, not {metric_type[:40]!r}")
    return _METRIC_TYPE[metric_type]


def downsampled(query: TimeSeriesQuery, series: Iterable[scheduler_pb2.MetricSeries]) -> list[dict[str, Any]]:
    """One trial's `DownsampledMetrics`, a group each in the order asked: its points up to
    `end_batches`, each with only the metrics asked for (points holding none of them left out)."""
    by_group: dict[str, list[dict[str, Any]]] = {group: [] for group in query.groups}
    for s in series:
        group = s.group or ("training" if s.kind == scheduler_pb2.METRIC_KIND_TRAINING else "validation")
        if group not in by_group:
            continue
        names = query.groups[group]
        for batches, metrics, end in zip(s.total_batches, s.metrics_json, s.end_time, strict=False):
            if batches > query.end_batches:
                continue
            values = json.loads(metrics)
            if names:
                values = {n: values[n] for n in names if n in values}
            if values:
                by_group[group].append({"batches": batches, "values": values, "time": end or None})
    return [
        {
            "data": sorted(points, key=lambda p: p["batches"]),
            "type": _TYPE_OF.get(group, "METRIC_TYPE_UNSPECIFIED"),
            "group": group,
        }
        for group, points in by_group.items()
    ]


def _series(c: Caller, query: TimeSeriesQuery, trial_id: int) -> list[scheduler_pb2.MetricSeries]:
    series: list[scheduler_pb2.MetricSeries] = []
    for kind, group in query.asks():
        message = scheduler_pb2.GetMetricsRequest(
            trial_id=trial_id,
            from_batches=query.start_batches,
            kind=kind,
            group=group,
            max_points=query.max_points,
        )
        try:
            series.extend(
                s for reply in c.gateway.stream(c.token, "GetMetrics", message) for s in reply.series
            )
        except grpc.RpcError as e:
            raise error_of(e) from None
    return series


def _compared(c: Caller, query: TimeSeriesQuery, trial_id: int) -> dict[str, Any]:
    detail, exp = _trial(c, trial_id)
    return {"trial": trial_value(detail, exp), "metrics": downsampled(query, _series(c, query, trial_id))}


def _compare(c: Caller, query: TimeSeriesQuery) -> dict[str, Any]:
    return {"trials": [_compared(c, query, t) for t in query.trial_ids]}


async def compare_trials(request: Request) -> JSONResponse:
    query = TimeSeriesQuery.parse({k: request.query_params.getlist(k) for k in request.query_params})
    return ok(await run_in_threadpool(_compare, caller(request), query))
