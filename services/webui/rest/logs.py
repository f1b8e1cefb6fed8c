"""A trial's log as Determined serves it twice: `/api/v1/trials/{id}/logs` and, under the trial's
task id (`trial-N`), `/api/v1/tasks/{taskId}/logs`; each with its `/logs/fields` listing of the
values its filters take. Lines stream as ndjson, with `follow` until the trial ends."""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError, error_of
from pedl_webui.rest.common import bool_param, caller, int_param, ndjson, path_id, results
from pedl_webui.rest.log_filters import FieldsSeen, LogFilter, Query
from pedl_webui.rest.shapes import log_ndjson

MAX_TAIL = 100_000
TASK_PREFIX = "trial-"


def _task_trial(request: Request) -> tuple[int, str]:
    """The trial behind a task id: pedl's tasks with logs are its trials (`trial-N`)."""
    task_id: str = request.path_params["taskId"]
    number = task_id[len(TASK_PREFIX) :]
    if not task_id.startswith(TASK_PREFIX) or not number.isdigit() or not 0 < int(number) < 2**31:
        message = f"task {task_id[:60]!r} not found: pedl's tasks with logs are trials (trial-N)"
        raise GatewayError(404, message)
    return int(number), task_id


async def trial_logs(request: Request) -> Response:
    return await _logs(request, path_id(request, "trialId"), "")


async def task_logs(request: Request) -> Response:
    return await _logs(request, *_task_trial(request))


async def trial_log_fields(request: Request) -> Response:
    return await _fields(request, path_id(request, "trialId"), task=False)


async def task_log_fields(request: Request) -> Response:
    return await _fields(request, _task_trial(request)[0], task=True)


def _query(request: Request) -> Query:
    params = request.query_params
    return Query({key: params.getlist(key) for key in params.keys()})


async def _logs(request: Request, trial_id: int, task_id: str) -> Response:
    """ndjson log lines that pass the filters; `follow` until the trial ends; `limit` with
    ORDER_BY_DESC is a tail (newest first, as Determined answers it), else the first `limit`."""
    c = caller(request)
    follow = bool(bool_param(request, "follow"))
    limit = int_param(request, "limit", 0, 0, MAX_TAIL)
    descending = request.query_params.get("orderBy") == "ORDER_BY_DESC"
    chosen = LogFilter.parse(_query(request))
    # Without filters the scheduler cuts the tail itself; with them, every line is read and filtered.
    tail = limit if descending and chosen.everything else 0
    following = follow and not descending
    message = scheduler_pb2.GetTrialLogsRequest(trial_id=trial_id, follow=following, tail=tail)
    call = c.gateway.stream(c.token, "GetTrialLogs", message)
    if descending:
        lines = [x for x in await run_in_threadpool(_read_all, call) if chosen.keeps(x)]
        newest = reversed(lines[-limit:] if limit else lines)
        return Response("".join(log_ndjson(x, task_id) for x in newest), media_type="application/json")
    sent = [0]
    keep_all = chosen.everything  # what `det trial logs -f` asks: every line written as it came

    def encode(reply: Any) -> str:
        kept = reply.lines if keep_all else [x for x in reply.lines if chosen.keeps(x)]
        if limit:
            kept = kept[: max(0, limit - sent[0])]
            sent[0] += len(kept)
        return "".join(log_ndjson(x, task_id) for x in kept)

    return await ndjson(call, encode, lambda: bool(limit) and sent[0] >= limit)


async def _fields(request: Request, trial_id: int, task: bool) -> Response:
    """One fields object over the lines so far; with `follow`, a new one whenever a value first
    appears, until the trial ends."""
    c = caller(request)
    follow = bool(bool_param(request, "follow"))
    seen = FieldsSeen(task)
    message = scheduler_pb2.GetTrialLogsRequest(trial_id=trial_id, follow=follow)
    call = c.gateway.stream(c.token, "GetTrialLogs", message)
    if not follow:
        seen.add(await run_in_threadpool(_read_all, call))
        return Response(json.dumps({"result": seen.json()}) + "\n", media_type="application/json")
    first = [True]

    def encode(reply: Any) -> str:
        new = seen.add(reply.lines)
        if new or first[0]:
            first[0] = False
            return results([seen.json()])
        return ""

    return await ndjson(call, encode)


def _read_all(call: Any) -> list[Any]:
    import grpc

    try:
        return [line for reply in call for line in reply.lines]
    except grpc.RpcError as e:
        raise error_of(e) from None
