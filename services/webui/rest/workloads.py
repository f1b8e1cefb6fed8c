"""`GET /api/v1/trials/{id}/workloads`: a trial's steps, validations and checkpoints as
Determined's workload containers (`det trial describe`, `det e describe`)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.common import caller, int_param, ok, page, path_id
from pedl_webui.rest.shapes import metrics_workload

_FILTERS = (
    "FILTER_OPTION_UNSPECIFIED",
    "FILTER_OPTION_CHECKPOINT",
    "FILTER_OPTION_VALIDATION",
    "FILTER_OPTION_CHECKPOINT_OR_VALIDATION",
)


def trial_workloads(request: Request) -> JSONResponse:
    c, trial_id = caller(request), path_id(request, "trialId")
    kind = request.query_params.get("filter") or "FILTER_OPTION_UNSPECIFIED"
    if kind not in _FILTERS:
        raise GatewayError(400, f"filter must be one of {', '.join(_FILTERS)}, not {kind[:40]}")
    rows: dict[int, dict[str, Any]] = {}
    token = ""
    while True:  # every page of the trial's steps, with the validations and checkpoints among them
        reply = c.call(
            "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=trial_id, page_size=5000, page_token=token)
        )
        if kind == "FILTER_OPTION_UNSPECIFIED":
            for s in reply.steps:
                rows.setdefault(s.total_batches, {})["training"] = metrics_workload(s)
        if kind != "FILTER_OPTION_CHECKPOINT":
            for v in reply.validations:
                rows.setdefault(v.total_batches, {})["validation"] = metrics_workload(v)
        if kind != "FILTER_OPTION_VALIDATION":
            for ck in reply.checkpoints:
                rows.setdefault(ck.total_batches, {})["checkpoint"] = {
                    "uuid": ck.uuid,
                    "endTime": ck.created_at or None,
                    "state": "STATE_COMPLETED",
                    "resources": {f.path: str(f.size) for f in ck.files},
                    "totalBatches": ck.total_batches,
                    "metadata": dict(ck.metadata),
                }
        token = reply.next_page_token
        if not token:
            break
    if kind == "FILTER_OPTION_CHECKPOINT_OR_VALIDATION":
        rows = {k: v for k, v in rows.items() if "checkpoint" in v or "validation" in v}
    ordered = [rows[k] for k in sorted(rows, reverse=request.query_params.get("orderBy") == "ORDER_BY_DESC")]
    containers: list[dict[str, Any]] = []
    for row in ordered:  # a step, a validation and a checkpoint at one batch are three workloads
        containers.extend(
            {name: row[name]} for name in ("training", "validation", "checkpoint") if name in row
        )
    offset, limit = int_param(request, "offset", 0, -(2**31)), int_param(request, "limit", 0)
    return ok(page(containers, offset, limit, "workloads"))
