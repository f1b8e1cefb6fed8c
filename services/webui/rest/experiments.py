"""Experiments: list, get, actions, patch, delete, their trials and checkpoints."""

from __future__ import annotations

import math
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui import configs
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.common import (
    EXPERIMENT_STATE,
    Caller,
    body,
    bool_param,
    caller,
    int_param,
    ok,
    page,
    path_id,
)
from pedl_webui.rest.shapes import checkpoint_json, experiment_json, trial_json

MAX_LIMIT = 1000
_STATE_VALUE = {v: k for k, v in EXPERIMENT_STATE.items()}
_SORTS = ("SORT_BY_UNSPECIFIED", "SORT_BY_ID", "SORT_BY_START_TIME")


def _list_request(request: Request) -> tuple[scheduler_pb2.ListExperimentsRequest, int, int]:
    q = request.query_params
    offset, limit = int_param(request, "offset", 0), int_param(request, "limit", 0, 0, 10**6)
    sort = q.get("sortBy") or "SORT_BY_UNSPECIFIED"
    if sort not in _SORTS:
        raise GatewayError(400, f"pedl sorts experiments by id (start time) only, not {sort[:40]}")
    order = q.get("orderBy") or "ORDER_BY_UNSPECIFIED"
    if order not in ("ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise GatewayError(400, f"orderBy must be ORDER_BY_ASC or ORDER_BY_DESC, not {order[:40]}")
    states = []
    for name in q.getlist("states"):
        if name not in _STATE_VALUE:
            raise GatewayError(400, f"no experiment state {name[:40]} in pedl")
        states.append(common_pb2.ExperimentState.Value("EXPERIMENT_STATE_" + _STATE_VALUE[name]))
    users = q.getlist("users")
    if len(users) > 1:
        raise GatewayError(400, "pedl filters experiments by one user at a time")
    archived = bool_param(request, "archived")
    message = scheduler_pb2.ListExperimentsRequest(
        newest_first=order == "ORDER_BY_DESC",
        states=states,
        owner=users[0] if users else "",
        exclude_archived=archived is False,
        text=(q.get("name") or "")[:200],
        with_config_document=True,  # each row's name, resource pool and searcher come from it
    )
    return message, offset, limit or MAX_LIMIT


def list_experiments(request: Request) -> JSONResponse:
    """One page at `offset`: pedl pages by id, so the rows before it are read and skipped. The
    total is exact on the last page; before it, one more than the page's end, so Determined's client
    asks for the next page."""
    c = caller(request)
    message, offset, limit = _list_request(request)
    archived = bool_param(request, "archived")
    rows: list[scheduler_pb2.Experiment] = []
    token, more = "", True
    while len(rows) < offset + limit and more:
        message.page_size = min(MAX_LIMIT, offset + limit - len(rows))
        message.page_token = token
        reply = c.call("ListExperiments", message)
        rows.extend(e for e in reply.experiments if archived is not True or e.archived)
        token = reply.next_page_token
        more = bool(token)
    chosen = rows[offset : offset + limit]
    end = offset + len(chosen)
    total = end + 1 if more else end
    pagination = {
        "offset": offset,
        "limit": limit,
        "startIndex": min(offset, end),
        "endIndex": end,
        "total": total,
    }
    return ok({"experiments": [experiment_json(e) for e in chosen], "pagination": pagination})


def _experiment(c: Caller, exp_id: int) -> scheduler_pb2.GetExperimentResponse:
    return c.call("GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=exp_id))


def get_experiment(request: Request) -> JSONResponse:
    reply = _experiment(caller(request), path_id(request, "experimentId"))
    value = experiment_json(reply.experiment, list(reply.trials))
    return ok({"experiment": value, "config": value["config"], "jobSummary": None})


_ACTIONS = {
    "activate": ("ActivateExperiment", scheduler_pb2.ActivateExperimentRequest),
    "pause": ("PauseExperiment", scheduler_pb2.PauseExperimentRequest),
    "cancel": ("KillExperiment", scheduler_pb2.KillExperimentRequest),
    "kill": ("KillExperiment", scheduler_pb2.KillExperimentRequest),
}


async def act(request: Request) -> JSONResponse:
    """activate / pause / cancel / kill (pedl's kill ends the trials CANCELED, as Determined's cancel)."""
    c, exp_id = caller(request), path_id(request, "experimentId")
    method, message = _ACTIONS[request.url.path.rsplit("/", 1)[1]]
    await run_in_threadpool(c.call, method, message(experiment_id=exp_id))
    return ok({})


async def archive(request: Request) -> JSONResponse:
    c, exp_id = caller(request), path_id(request, "experimentId")
    archived = request.url.path.endswith("/archive")
    await run_in_threadpool(
        c.call,
        "PatchExperiment",
        scheduler_pb2.PatchExperimentRequest(experiment_id=exp_id, archived=archived),
    )
    return ok({})


async def delete(request: Request) -> JSONResponse:
    c, exp_id = caller(request), path_id(request, "experimentId")
    await run_in_threadpool(
        c.call, "DeleteExperiment", scheduler_pb2.DeleteExperimentRequest(experiment_id=exp_id)
    )
    return ok({})


async def patch(request: Request) -> JSONResponse:
    """description, labels and notes; the name lives in the config (refused unless unchanged)."""
    fields = await body(
        request,
        {
            "id": int,
            "description": str,
            "labels": list,
            "name": str,
            "notes": str,
            "resources": dict,
            "checkpointStorage": dict,
        },
    )
    c, exp_id = caller(request), path_id(request, "experimentId")
    current = (await run_in_threadpool(_experiment, c, exp_id)).experiment
    if fields.get("name") not in (None, experiment_json(current)["name"]):
        raise GatewayError(400, "pedl names an experiment in its config (name:); patch description or labels")
    message = scheduler_pb2.PatchExperimentRequest(experiment_id=exp_id)
    if fields.get("description") is not None:
        message.description = fields["description"]
    if fields.get("notes") is not None:
        message.notes = fields["notes"]
    resources = fields.get("resources") or {}
    for key in resources:
        if key not in ("maxSlots", "weight", "priority"):
            raise GatewayError(400, f'unknown field "resources.{key}"')
    if resources.get("maxSlots") is not None:
        message.max_slots = int(resources["maxSlots"])
    if resources.get("weight") is not None:
        message.weight = float(resources["weight"])
    if resources.get("priority") is not None:
        message.priority = int(resources["priority"])
    if fields.get("labels") is not None:
        labels = fields["labels"]
        if not all(isinstance(x, str) for x in labels):
            raise GatewayError(400, 'field "labels" must be a list of strings')
        message.add_labels.extend(sorted(set(labels) - set(current.labels)))
        message.remove_labels.extend(sorted(set(current.labels) - set(labels)))
    reply = await run_in_threadpool(c.call, "PatchExperiment", message)
    return ok({"experiment": experiment_json(reply.experiment)})


def _details(c: Caller, exp_id: int, trial_ids: list[int]) -> list[scheduler_pb2.GetTrialResponse]:
    """The trials `trial_ids` (ascending, consecutive in the experiment) with validations and
    checkpoints, in pages of ListTrialDetails."""
    out: list[scheduler_pb2.GetTrialResponse] = []
    if not trial_ids:
        return out
    after, wanted = trial_ids[0] - 1, set(trial_ids)
    while len(out) < len(trial_ids):
        reply = c.call(
            "ListTrialDetails",
            scheduler_pb2.ListTrialDetailsRequest(
                experiment_id=exp_id, after_trial_id=after, limit=min(500, len(trial_ids))
            ),
        )
        out.extend(d for d in reply.trials if d.trial.id in wanted)
        if not reply.next_after_trial_id or not reply.trials or reply.trials[-1].trial.id >= trial_ids[-1]:
            break
        after = reply.next_after_trial_id
    return out


def experiment_trials(request: Request) -> JSONResponse:
    c, exp_id = caller(request), path_id(request, "experimentId")
    offset, limit = int_param(request, "offset", 0, -(2**31)), int_param(request, "limit", 0)
    reply = _experiment(c, exp_id)
    ordered = sorted(
        reply.trials, key=lambda t: t.id, reverse=request.query_params.get("orderBy") == "ORDER_BY_DESC"
    )
    states = set(request.query_params.getlist("states"))
    if states:
        ordered = [t for t in ordered if trial_json(t)["state"] in states]
    chosen = page(ordered, offset, limit, "trials")
    ids = sorted(t.id for t in chosen["trials"])
    space = configs.hparam_space(configs.experiment_config(reply.experiment))
    exp = reply.experiment
    by_id = {d.trial.id: d for d in _details(c, exp_id, ids)}
    rows = []
    for t in chosen["trials"]:
        d = by_id.get(t.id)
        rows.append(
            trial_json(
                t,
                space,
                list(d.validations) if d else None,
                list(d.checkpoints) if d else None,
                exp.searcher_metric,
                exp.smaller_is_better,
            )
        )
    return ok({"trials": rows, "pagination": chosen["pagination"]})


def experiment_checkpoints(request: Request) -> JSONResponse:
    c, exp_id = caller(request), path_id(request, "experimentId")
    reply = _experiment(c, exp_id)
    details = _details(c, exp_id, sorted(t.id for t in reply.trials))
    return ok(checkpoint_page(request, reply.experiment, details))


def checkpoint_page(
    request: Request, exp: scheduler_pb2.Experiment, details: list[scheduler_pb2.GetTrialResponse]
) -> dict[str, Any]:
    """Checkpoints of `details`, with the validation at the same batch, sorted and paged as asked."""
    rows = []
    batches: dict[str, int] = {}  # by uuid: a user's metadata may lack "steps_completed"
    for d in details:
        validations = {v.total_batches: v for v in d.validations}
        for ck in d.checkpoints:
            rows.append(checkpoint_json(ck, exp, d.trial, validations.get(ck.total_batches)))
            batches[ck.uuid] = ck.total_batches
    states = set(request.query_params.getlist("states"))
    if states:
        rows = [r for r in rows if r["state"] in states]
    q = request.query_params
    metric = q.get("sortByMetric") or ""
    attr = q.get("sortByAttr") or "SORT_BY_UNSPECIFIED"
    descending = q.get("orderBy") == "ORDER_BY_DESC"
    if attr == "SORT_BY_SEARCHER_METRIC":
        metric = exp.searcher_metric

    def metric_of(row: dict[str, Any]) -> Any:
        return (row["training"]["validationMetrics"].get("avgMetrics") or {}).get(metric)

    def ranked(row: dict[str, Any]) -> bool:  # a number to sort by; NaN sorts with the absent
        value = metric_of(row)
        return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))

    if metric:
        present = [r for r in rows if ranked(r)]
        absent = [r for r in rows if not ranked(r)]
        rows = sorted(present, key=metric_of, reverse=descending) + absent
    else:
        keys = {
            "SORT_BY_UUID": lambda r: r["uuid"],
            "SORT_BY_TRIAL_ID": lambda r: r["training"]["trialId"],
            "SORT_BY_BATCH_NUMBER": lambda r: batches[r["uuid"]],
            "SORT_BY_END_TIME": lambda r: r["reportTime"] or "",
            "SORT_BY_STATE": lambda r: r["state"],
            "SORT_BY_UNSPECIFIED": lambda r: (r["training"]["trialId"], batches[r["uuid"]]),
        }
        if attr not in keys:
            raise GatewayError(400, f"sortByAttr {attr[:40]} is not one pedl sorts by")
        rows = sorted(rows, key=keys[attr], reverse=descending)
    offset, limit = int_param(request, "offset", 0, -(2**31)), int_param(request, "limit", 0)
    return page(rows, offset, limit, "checkpoints")
