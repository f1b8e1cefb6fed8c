"""Determined's `POST /api/v1/trials/{trialId}/metrics` (ReportTrialMetrics): a user's script (an
unmanaged Core API trial, a notebook) reports a trial's training or validation metrics (or a custom
group's), recorded by the scheduler's `ReportTrialMetrics` as the trial's own results are.

The body is Determined's `v1ReportTrialMetricsRequest` (`{"group", "metrics": {"trialId",
"trialRunId", "stepsCompleted", "reportTime", "metrics": {"avgMetrics", "batchMetrics"}}}`),
parsed strictly here (`report_request`, no network) so a bad one is one 400 line naming the field.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl._metrics import check_group, to_struct
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


def metric_group(group: Any) -> tuple[Kind, str]:
    """pedl's (MetricKind, custom group) for Determined's metric group: training and validation are
    kinds; any other name is a custom group (kind UNSPECIFIED). One 400 line for a bad name."""
    if not group or not isinstance(group, str):
        raise GatewayError(400, 'give "group": "training", "validation" or a custom group\'s name')
    try:
        check_group(group)
    except ValueError as e:
        raise GatewayError(400, str(e)) from None
    return GROUPS.get(group, scheduler_pb2.METRIC_KIND_UNSPECIFIED), "" if group in GROUPS else group


def report_request(trial_id: int, value: dict[str, Any]) -> scheduler_pb2.ReportTrialMetricsRequest:
    """The scheduler's request for the JSON body sent to `/api/v1/trials/{trial_id}/metrics`."""
    kind, custom = metric_group(value.get("group"))
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
        group=custom,
    )


async def report_trial_metrics(request: Request) -> JSONResponse:
    trial_id = path_id(request, "trialId")
    value = await body(request, {"metrics": dict, "group": str})
    message = report_request(trial_id, value)
    c = caller(request)
    await run_in_threadpool(c.call, "ReportTrialMetrics", message)
    return ok({})
