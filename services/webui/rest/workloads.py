"""`GET /api/v1/trials/{id}/workloads`: a trial's steps, validations and checkpoints as
Determined's workload containers (`det trial describe`, `det e describe`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl import records
from pedl._metrics import from_struct
from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.common import Caller, caller, int_param, ok, page, path_id
from pedl_webui.rest.shapes import checkpoint_metadata, metrics_workload
from pedl_webui.rest.summary import summary_metrics

_FILTERS = (
    "FILTER_OPTION_UNSPECIFIED",
    "FILTER_OPTION_CHECKPOINT",
    "FILTER_OPTION_VALIDATION",
    "FILTER_OPTION_CHECKPOINT_OR_VALIDATION",
)


_CHECKPOINT_STATES = {"COMPLETED": "STATE_COMPLETED"}  # deleted, deleting or missing: STATE_DELETED


def trial_pages(
    c: Caller, trial_id: int, with_deleted: bool = False, group_figures: bool = False
) -> Iterator[scheduler_pb2.GetTrialResponse]:
    """Every page of the trial's steps, with the validations and checkpoints among them (and on the
    first, its custom metric groups: with `group_figures`, each metric's figures too)."""
    token = ""
    while True:
        reply = c.call(
            "GetTrial",
            scheduler_pb2.GetTrialRequest(
                trial_id=trial_id,
                page_size=5000,
                page_token=token,
                include_deleted_checkpoints=with_deleted,
                group_figures=group_figures,
            ),
        )
        yield reply
        token = reply.next_page_token
        if not token:
            return


def summary_of(c: Caller, trial_id: int) -> dict[str, Any]:
    """The trial's `summaryMetrics`, folded from every step and validation it reported, and its
    custom groups as the scheduler folded them."""
    training: list[dict[str, Any]] = []
    validation: list[dict[str, Any]] = []
    groups: dict[str, dict[str, Any]] = {}
    for reply in trial_pages(c, trial_id, group_figures=True):
        training.extend(from_struct(s.metrics) for s in reply.steps)
        validation.extend(from_struct(v.metrics) for v in reply.validations)
        groups.update((g.group, records.metric_group_record(g)["metrics"]) for g in reply.metric_groups)
    return summary_metrics(training, validation, groups)


def trial_workloads(request: Request) -> JSONResponse:
    """Every checkpoint the trial took is listed, garbage-collected ones as STATE_DELETED, as
    Determined lists them (its `det trial describe` counts them)."""
    c, trial_id = caller(request), path_id(request, "trialId")
    kind = request.query_params.get("filter") or "FILTER_OPTION_UNSPECIFIED"
    if kind not in _FILTERS:
        raise GatewayError(400, f"filter must be one of {', '.join(_FILTERS)}, not {kind[:40]}")
    rows: dict[int, dict[str, Any]] = {}
    for reply in trial_pages(c, trial_id, with_deleted=True):
        if kind == "FILTER_OPTION_UNSPECIFIED":
            for s in reply.steps:
                rows.setdefault(s.total_batches, {})["training"] = metrics_workload(s)
        if kind != "FILTER_OPTION_CHECKPOINT":
            for v in reply.validations:
                rows.setdefault(v.total_batches, {})["validation"] = metrics_workload(v)
        if kind != "FILTER_OPTION_VALIDATION":
            for ck in reply.checkpoints:
                state = records.checkpoint_state(ck.state)
                rows.setdefault(ck.total_batches, {})["checkpoint"] = {
                    "uuid": ck.uuid,
                    "endTime": ck.created_at or None,
                    "state": _CHECKPOINT_STATES.get(state, "STATE_DELETED"),
                    "resources": {f.path: str(f.size) for f in ck.files} if state == "COMPLETED" else {},
                    "totalBatches": ck.total_batches,
                    "metadata": checkpoint_metadata(ck),
                }
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
