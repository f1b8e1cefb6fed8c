"""Determined's `POST /api/v1/trials/{trialId}/metrics` (ReportTrialMetrics): a user's script (an
unmanaged Core API trial, a notebook) reports a trial's training or validation metrics, recorded by
the scheduler's `ReportTrialMetrics` as the trial's own results are.

The body is Determined's `v1ReportTrialMetricsRequest` (`{"group", "metrics": {"trialId",
"trialRunId", "stepsCompleted", "reportTime", "metrics": {"avgMetrics", "batchMetrics"}}}`),
parsed strictly here (`report_request`, no network) so a bad one is one 400 line naming the field.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl._metrics import to_struct
from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.common import body, caller, check_fields, ok, path_id

Kind: TypeAlias = scheduler_pb2.MetricKind.ValueType
GROUPS: dict[str, Kind] = {
    "training": scheduler_pb2.METRIC_KIND_TRAINING,
    "validation": scheduler_pb2.METRIC_KIND_VALIDATION,
}
_TRIAL_METRICS: dict[str, type | tuple[type, ...]] = {
    "trialId": int,
    "trialRunId": int,
    "stepsCompleted": int,
    "reportTime": str,
    "metrics": dict,
}
_METRICS: dict[str, type | tuple[type, ...]] = {"avgMetrics": dict, "batchMetrics": list}


def group_kind(group: Any) -> Kind:
    """pedl's MetricKind for Determined's metric group; one 400 for a group pedl does not record."""
    if not group:
        raise GatewayError(400, 'give "group": "training" or "validation"')
    kind = GROUPS.get(group) if isinstance(group, str) else None
    if kind is None:
        raise GatewayError(
            400,
            f'group must be "training" or "validation", not {str(group)[:40]!r}: '
            "pedl records no custom metric groups",
        )
    return kind


def report_request(trial_id: int, value: dict[str, Any]) -> scheduler_pb2.ReportTrialMetricsRequest:
    """The scheduler's request for the JSON body sent to `/api/v1/trials/{trial_id}/metrics`."""
    kind = group_kind(value.get("group"))
    trial = check_fields(value.get("metrics"), _TRIAL_METRICS, '"metrics"')
    if trial.get("trialId") not in (None, trial_id):
        named = trial["trialId"]
        raise GatewayError(400, f"metrics.trialId {named} is not the trial in the path ({trial_id})")
    steps = trial.get("stepsCompleted")
    if steps is None:
        raise GatewayError(400, "metrics.stepsCompleted is required: the batches trained at the report")
    if not 0 <= steps < 2**31:
        raise GatewayError(400, f"metrics.stepsCompleted must be 0 or more, got {steps}")
    metrics = check_fields(trial.get("metrics"), _METRICS, '"metrics.metrics"')
    if metrics.get("batchMetrics"):
        raise GatewayError(400, "pedl records avgMetrics only: send metrics.batchMetrics empty")
    averages = metrics.get("avgMetrics")
    if not averages:
        raise GatewayError(400, "metrics.metrics.avgMetrics is required: metric name -> number")
    try:
        struct = to_struct(averages)
    except (TypeError, ValueError) as e:
        raise GatewayError(400, f"metrics.metrics.avgMetrics: {e}") from None
    return scheduler_pb2.ReportTrialMetricsRequest(
        trial_id=trial_id,
        kind=kind,
        steps_completed=steps,
        metrics=struct,
        report_time=trial.get("reportTime") or "",
    )


async def report_trial_metrics(request: Request) -> JSONResponse:
    trial_id = path_id(request, "trialId")
    value = await body(request, {"metrics": dict, "group": str})
    message = report_request(trial_id, value)
    c = caller(request)
    await run_in_threadpool(c.call, "ReportTrialMetrics", message)
    return ok({})
