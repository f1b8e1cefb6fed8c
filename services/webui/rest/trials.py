"""Trials (get, kill, checkpoints), their logs and metrics as streams, and checkpoints by uuid
(get, delete, and the master-mode download Determined's client falls back to)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from pedl.checkpoints import CheckpointStoreClient
from pedl.checkpoints.errors import CheckpointError
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui import configs, downloads
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.common import Caller, body, caller, check_fields, json_body, ndjson, ok, path_id, results
from pedl_webui.rest.experiments import checkpoint_page
from pedl_webui.rest.metric_reports import metric_group
from pedl_webui.rest.shapes import checkpoint_json, trial_json
from pedl_webui.rest.workloads import summary_of, trial_pages


def _trial(
    c: Caller, trial_id: int
) -> tuple[scheduler_pb2.GetTrialResponse, scheduler_pb2.GetExperimentResponse]:
    """The trial with its validations and checkpoints, and its experiment."""
    reply = c.call("GetTrial", scheduler_pb2.GetTrialRequest(trial_id=trial_id, page_size=1))
    exp = c.call("GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=reply.trial.experiment_id))
    details = c.call(
        "ListTrialDetails",
        scheduler_pb2.ListTrialDetailsRequest(
            experiment_id=exp.experiment.id, after_trial_id=trial_id - 1, limit=1
        ),
    ).trials
    if details and details[0].trial.id == trial_id:
        return details[0], exp
    return reply, exp


def trial_value(
    detail: scheduler_pb2.GetTrialResponse, exp: scheduler_pb2.GetExperimentResponse
) -> dict[str, Any]:
    """A trial in Determined's JSON, typed by its experiment's hyperparameter space."""
    space = configs.hparam_space(configs.experiment_config(exp.experiment))
    return trial_json(
        detail.trial,
        space,
        list(detail.validations),
        list(detail.checkpoints),
        exp.experiment.searcher_metric,
        exp.experiment.smaller_is_better,
    )


def get_trial(request: Request) -> JSONResponse:
    c = caller(request)
    detail, exp = _trial(c, path_id(request, "trialId"))
    value = trial_value(detail, exp)
    value["summaryMetrics"] = summary_of(c, detail.trial.id)
    return ok({"trial": value})


async def kill_trial(request: Request) -> JSONResponse:
    c, trial_id = caller(request), path_id(request, "trialId")
    await run_in_threadpool(c.call, "KillTrial", scheduler_pb2.KillTrialRequest(trial_id=trial_id))
    return ok({})


def trial_checkpoints(request: Request) -> JSONResponse:
    """Every checkpoint the trial took, deleted ones too (STATE_DELETED), unless `states` picks some:
    Determined's GetTrialCheckpoints filters by state only when asked to."""
    c, trial_id = caller(request), path_id(request, "trialId")
    detail = scheduler_pb2.GetTrialResponse()
    for reply in trial_pages(c, trial_id, with_deleted=True):
        detail.trial.CopyFrom(reply.trial)
        detail.validations.extend(reply.validations)
        detail.checkpoints.extend(reply.checkpoints)
    exp = c.call(
        "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=detail.trial.experiment_id)
    )
    return ok(checkpoint_page(request, exp.experiment, [detail]))


async def trial_metrics(request: Request) -> Response:
    """Determined's `GET /api/v1/trials/metrics/trial_metrics?trialIds=&group=` (the SDK's
    `iter_metrics`, `stream_trials_metrics`): the trials' stored reports, trial by trial in id order,
    and then the end, as Determined's master answers it: it never follows, so a running or PAUSED
    trial's stream ends too (pedl's own followers, the CLI and the web UI, ask the scheduler with
    `follow` and keep that)."""
    c = caller(request)
    ids = request.query_params.getlist("trialIds")
    if not ids:
        raise GatewayError(400, "must specify at least one trialId")
    bad = next((i for i in ids if not i.isdigit()), None)
    if bad is not None:
        raise GatewayError(400, f"trialIds must be trial ids, not {bad[:40]!r}")
    group = request.query_params.get("group") or "training"
    kind, custom = metric_group(group)

    def start(trial_id: int) -> Any:
        message = scheduler_pb2.GetMetricsRequest(trial_id=trial_id, follow=False, kind=kind, group=custom)
        return c.gateway.stream(c.token, "GetMetrics", message)

    def encode(reply: scheduler_pb2.GetMetricsResponse) -> str:
        reports = metric_reports(reply, group)
        return results([{"metrics": reports}]) if reports else ""

    return await ndjson(InTurn(start, sorted(int(i) for i in ids)), encode)


class InTurn:
    """Several scheduler streams read one after another as one call; `.cancel()` ends the lot.
    Each is started only when the one before it has ended."""

    def __init__(self, start: Callable[[int], Any], keys: list[int]) -> None:
        self._start, self._keys = start, keys
        self._current: Any = None
        self._cancelled = False

    def __iter__(self) -> Iterator[Any]:
        for key in self._keys:
            if self._cancelled:
                return
            self._current = self._start(key)
            yield from self._current

    def cancel(self) -> None:
        self._cancelled = True
        if self._current is not None:
            self._current.cancel()


def metric_reports(reply: scheduler_pb2.GetMetricsResponse, group: str) -> list[dict[str, Any]]:
    """The reply's `group` rows as Determined's MetricsReports, each with the run that wrote it."""
    reports = []
    kind, custom = metric_group(group)
    for series in reply.series:
        if (series.kind, series.group) != (kind, custom):
            continue
        runs = list(series.run_id) or [1] * len(series.total_batches)  # a scheduler before run ids
        for batches, metrics, end, run in zip(
            series.total_batches, series.metrics_json, series.end_time, runs, strict=False
        ):
            reports.append(
                {
                    "trialId": series.trial_id,
                    "endTime": end or None,
                    "metrics": _report_metrics(group, json.loads(metrics)),
                    "totalBatches": batches,
                    "archived": False,
                    "id": batches,
                    "trialRunId": run,
                    "group": group,
                }
            )
    return reports


def _report_metrics(group: str, values: dict[str, Any]) -> dict[str, Any]:
    """The report's metrics as Determined stores them: validation metrics under
    `validation_metrics`, training under `avg_metrics` (its SDK reads those keys); no
    `batch_metrics`, since pedl keeps none (Determined's SDK then reads None, as from its own)."""
    if group == "validation":
        return {"validation_metrics": values}
    return {"avg_metrics": values}


def _store(c: Caller) -> str:
    address = c.call("GetClusterInfo", scheduler_pb2.GetClusterInfoRequest()).checkpoint_store_address
    if not address:
        raise GatewayError(503, "the scheduler names no checkpoint store")
    return address


def get_checkpoint(request: Request) -> JSONResponse:
    c, uuid = caller(request), request.path_params["checkpointUuid"]
    if not downloads.UUID.match(uuid):
        raise GatewayError(404, f"checkpoint {uuid!r} not found")
    try:
        with CheckpointStoreClient(_store(c), token=c.token) as store:
            ck = store.get(uuid)
    except CheckpointError as e:
        if "not found" not in str(e).lower():
            raise GatewayError(502, str(e)) from None
        return ok({"checkpoint": recorded_checkpoint(c, uuid)})  # deleted: the scheduler's record
    return ok({"checkpoint": _shaped(c, ck)})


def recorded_checkpoint(c: Caller, uuid: str) -> dict[str, Any]:
    """A checkpoint the store no longer holds (deleted by a user or garbage collection), as the
    scheduler recorded it, with its state (STATE_DELETED): Determined keeps a deleted checkpoint's
    record and answers it so. A 404 for a uuid the scheduler never recorded."""
    first = c.call("GetTrial", scheduler_pb2.GetTrialRequest(checkpoint_uuid=uuid, page_size=1))
    trial_id = first.trial.id
    found = None
    validations: dict[int, scheduler_pb2.Validation] = {}
    for reply in trial_pages(c, trial_id, with_deleted=True):
        validations.update((v.total_batches, v) for v in reply.validations)
        found = found or next((ck for ck in reply.checkpoints if ck.uuid == uuid), None)
    if found is None:  # deleted with its trial meanwhile
        raise GatewayError(404, f"checkpoint {uuid!r} not found")
    exp = c.call("GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=first.trial.experiment_id))
    return checkpoint_json(found, exp.experiment, first.trial, validations.get(found.total_batches))


def _shaped(c: Caller, ck: common_pb2.Checkpoint) -> dict[str, Any]:
    """Determined's Checkpoint for `ck`, with its trial, validation, and the state and user metadata
    of the scheduler's record (the store keeps neither)."""
    detail, exp = _trial(c, ck.trial_id)
    recorded = {r.uuid: r for r in detail.checkpoints}.get(ck.uuid)
    if recorded is not None:
        ck.state = recorded.state  # the scheduler's: PARTIALLY_DELETED once files were removed
        if recorded.user_metadata_json:
            ck.user_metadata_json = recorded.user_metadata_json
    validation = {v.total_batches: v for v in detail.validations}.get(ck.total_batches)
    return checkpoint_json(ck, exp.experiment, detail.trial, validation)


# Determined's v1Checkpoint, as its SDK sends it back (`Checkpoint.add_metadata`): only the
# metadata is written; the rest is what the master already knows.
_CHECKPOINT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "uuid": str,
    "taskId": str,
    "allocationId": str,
    "reportTime": str,
    "resources": dict,
    "metadata": dict,
    "state": str,
    "training": dict,
    "storageId": int,
}


def metadata_request(uuid: str, value: Any) -> scheduler_pb2.SetCheckpointMetadataRequest:
    """The scheduler's request for Determined's PostCheckpointMetadata body, or one 400 line."""
    fields = check_fields(value, {"checkpoint": dict})
    sent = check_fields(fields.get("checkpoint"), _CHECKPOINT_FIELDS, 'the body\'s "checkpoint"')
    if sent.get("uuid") not in (None, "", uuid):
        raise GatewayError(400, f'"checkpoint.uuid" {sent["uuid"][:64]!r} is not the path\'s {uuid[:64]!r}')
    if not isinstance(sent.get("metadata"), dict):
        raise GatewayError(400, 'give "checkpoint": {"metadata": {...}}, a JSON object')
    return scheduler_pb2.SetCheckpointMetadataRequest(
        checkpoint_uuid=uuid, metadata_json=json.dumps(sent["metadata"], allow_nan=True)
    )


async def post_checkpoint_metadata(request: Request) -> JSONResponse:
    """Determined's `POST /api/v1/checkpoints/{uuid}/metadata`: `checkpoint.metadata` replaces the
    checkpoint's user metadata whole (its SDK merges or removes keys first); the experiment's owner
    or an admin."""
    uuid = request.path_params["checkpointUuid"]
    message = metadata_request(uuid, await json_body(request))
    if not downloads.UUID.match(uuid):
        raise GatewayError(404, f"checkpoint {uuid[:64]!r} not found")
    c = caller(request)
    reply = await run_in_threadpool(c.call, "SetCheckpointMetadata", message)
    return ok({"checkpoint": await run_in_threadpool(_shaped, c, reply.checkpoint)})


async def delete_checkpoints(request: Request) -> JSONResponse:
    fields = await body(request, {"checkpointUuids": list})
    uuids = fields.get("checkpointUuids") or []
    if not uuids or not all(isinstance(u, str) for u in uuids):
        raise GatewayError(400, 'give "checkpointUuids": a list of checkpoint uuids')
    c = caller(request)
    # As Determined's master: answered once the checkpoints are marked deleted and their
    # "Checkpoint GC" tasks (listed by GET /api/v1/tasks) are started; the tasks delete the files.
    request_pb = scheduler_pb2.DeleteCheckpointsRequest(checkpoint_uuids=uuids, in_background=True)
    await run_in_threadpool(c.call, "DeleteCheckpoints", request_pb)
    return ok({})


def remove_request(value: Any) -> scheduler_pb2.SchedulerServiceRemoveCheckpointFilesRequest:
    """The scheduler's request for Determined's CheckpointsRemoveFiles body, or one 400 line."""
    fields = check_fields(value, {"checkpointUuids": list, "checkpointGlobs": list})
    uuids, globs = fields.get("checkpointUuids") or [], fields.get("checkpointGlobs") or []
    if not uuids or not all(isinstance(u, str) for u in uuids):
        raise GatewayError(400, 'give "checkpointUuids": a list of checkpoint uuids')
    if not all(isinstance(g, str) for g in globs):
        raise GatewayError(400, '"checkpointGlobs" must be a list of strings')
    return scheduler_pb2.SchedulerServiceRemoveCheckpointFilesRequest(checkpoint_uuids=uuids, globs=globs)


async def remove_checkpoint_files(request: Request) -> JSONResponse:
    """Determined's `POST /api/v1/checkpoints/rm` (CheckpointsRemoveFiles): removes the files any glob
    names from each checkpoint, which becomes STATE_PARTIALLY_DELETED (STATE_DELETED once empty);
    no globs (or only ""): nothing is removed. Authorized and refused as a checkpoint delete."""
    message = remove_request(await json_body(request))
    await run_in_threadpool(caller(request).call, "RemoveCheckpointFiles", message)
    return ok({})


def download_checkpoint(request: Request) -> Response:
    """`GET /checkpoints/{uuid}`: the files as a .tar.gz with paths relative to the checkpoint,
    whole before any byte goes out (a failure stays an error status)."""
    c, uuid = caller(request), request.path_params["checkpointUuid"]
    spool = tempfile.TemporaryFile()
    try:
        downloads.write_tar(c.gateway, c.token, uuid, spool, arcname=".")
        spool.seek(0)
    except BaseException:
        spool.close()
        raise

    def chunks() -> Iterator[bytes]:
        with spool:
            while chunk := spool.read(1 << 20):
                yield chunk

    return StreamingResponse(chunks(), media_type="application/gzip")
