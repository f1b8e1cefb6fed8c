"""What a user's script may report as a trial's metrics (`ReportTrialMetrics`): checked here, with
no database, so the rule is one place for the gRPC and REST callers alike.

A report is one row of the trial's results: its training metrics (a step row) or its validation
metrics (a validation row) at `steps_completed`. Its values are what pedl charts and ranks: numbers,
or (nested) lists of numbers as the harness sends tensors; anything else is refused, naming the metric.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from google.protobuf import json_format, struct_pb2

from pedl._metrics import BUILTIN_GROUPS, check_group
from pedl.v1 import scheduler_pb2

KINDS = {scheduler_pb2.METRIC_KIND_TRAINING: "training", scheduler_pb2.METRIC_KIND_VALIDATION: "validation"}

MAX_METRICS = 1000  # names in one report
MAX_NAME = 256  # characters in one metric's name


class ReportError(ValueError):
    """A report refused before anything is stored; the message is the one line the caller reads."""


@dataclass(frozen=True)
class MetricReport:
    trial_id: int
    kind: str  # "training" | "validation" | "custom" (then `group` names it)
    steps_completed: int
    metrics: dict[str, Any]
    report_time: str  # RFC 3339 UTC as pedl stores times; "" for the time it is stored
    group: str = ""

    @property
    def metrics_json(self) -> str:
        return json.dumps(self.metrics)

    @classmethod
    def from_request(cls, request: scheduler_pb2.ReportTrialMetricsRequest) -> MetricReport:
        kind, group = custom_group(request.group) if request.group else (KINDS.get(request.kind), "")
        if kind is None or (group and request.kind != scheduler_pb2.METRIC_KIND_UNSPECIFIED):
            raise ReportError("kind must be METRIC_KIND_TRAINING or METRIC_KIND_VALIDATION, or a group alone")
        if request.steps_completed < 0:
            raise ReportError(f"steps_completed must be 0 or more, got {request.steps_completed}")
        metrics = {name: _plain(name, value) for name, value in request.metrics.fields.items()}
        check_metrics(metrics)
        when = _time(request.report_time)
        return cls(request.trial_id, kind, request.steps_completed, metrics, when, group)


def custom_group(name: str) -> tuple[str, str]:
    """(kind, group) for a group's name: training and validation are kinds, any other is "custom"."""
    try:
        check_group(name)
    except ValueError as e:
        raise ReportError(str(e)) from None
    return (name, "") if name in BUILTIN_GROUPS else ("custom", name)


def check_metrics(metrics: dict[str, Any]) -> None:
    """Raises ReportError unless every value is a number or a (nested) list of numbers."""
    if not metrics:
        raise ReportError("the report holds no metrics")
    if len(metrics) > MAX_METRICS:
        raise ReportError(f"the report holds {len(metrics)} metrics; at most {MAX_METRICS} are accepted")
    for name, value in metrics.items():
        if not name or len(name) > MAX_NAME:
            raise ReportError(f"metric names must be 1-{MAX_NAME} characters, got {name[:40]!r}")
        if not _numeric(value):
            shown = json.dumps(value)[:40]
            raise ReportError(f"metric {name!r} must be a number (or a list of numbers), got {shown}")


def _plain(name: str, value: struct_pb2.Value) -> Any:
    try:
        return json_format.MessageToDict(value)
    except ValueError:  # NaN or an infinity: JSON, and so the stored row, cannot hold it
        raise ReportError(f"metric {name!r} must be a finite number, got NaN or an infinity") from None


def _time(text: str) -> str:
    if not text:
        return ""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ReportError(f"report_time must be an RFC 3339 time, got {text[:40]!r}") from None
    if value.tzinfo is None:
        raise ReportError(f"report_time must name its time zone (Z or +HH:MM), got {text[:40]!r}")
    utc = value.astimezone(timezone.utc)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _numeric(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, list):
        return all(_numeric(v) for v in value)
    return False
