"""Creating experiments from Determined's request (config text and the model definition as
files), the model definition back as an archive, and the one workspace and project pedl has
(Determined's clients expect workspace 1 / project 1, "Uncategorized") with its columns."""

from __future__ import annotations

import base64
import binascii
import io
import tarfile
from typing import Any

import grpc
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl.config import carried
from pedl.config import experiment as experiment_config
from pedl.config.errors import ConfigError
from pedl.context.pack import DEFAULT_MAX_BYTES
from pedl.v1 import scheduler_pb2
from pedl_webui import configs
from pedl_webui.gateway import GatewayError, error_of
from pedl_webui.rest.common import Caller, body, caller, ok, path_id
from pedl_webui.rest.metric_streams import NAME_POINTS, MetricNames
from pedl_webui.rest.project_columns import project_columns
from pedl_webui.rest.shapes import experiment_json

_CREATE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "config": str,
    "modelDefinition": list,
    "activate": bool,
    "validateOnly": bool,
    "projectId": int,
    "parentId": int,
    "template": str,
    "unmanaged": bool,
}
_FILE_FIELDS = ("path", "type", "content", "mtime", "mode", "uid", "gid")


def model_definition_archive(files: list[Any], max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Determined's `modelDefinition` (v1File: path, tar type flag, base64 content, mode, mtime)
    as the tar.gz pedl's scheduler takes; bounded as pedl's own CLI bounds a context."""
    buffer = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for index, item in enumerate(files):
            where = f"modelDefinition[{index}]"
            if not isinstance(item, dict) or not isinstance(item.get("path"), str) or not item["path"]:
                raise GatewayError(400, f"{where} must be an object with a path")
            unknown = set(item) - set(_FILE_FIELDS)
            if unknown:
                raise GatewayError(400, f'unknown field "{sorted(unknown)[0]}" in {where}')
            path = item["path"]
            if path.startswith("/") or ".." in path.split("/"):
                raise GatewayError(400, f"{where}.path must stay inside the context, got {path[:80]!r}")
            kind = item.get("type", ord("0"))
            if not isinstance(kind, int) or kind not in (0, ord("0"), ord("5")):
                raise GatewayError(400, f"{where}.type must be a file (48) or a directory (53)")
            info = tarfile.TarInfo(path)
            mode, mtime = item.get("mode", 0o644), item.get("mtime", 0)
            if not isinstance(mode, int) or not isinstance(mtime, (int, str)):
                raise GatewayError(400, f"{where}.mode must be an integer and mtime a time")
            info.mode = mode & 0o777
            info.mtime = int(mtime) if str(mtime).isdigit() else 0
            if kind == ord("5"):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            try:
                data = base64.b64decode(item.get("content") or "", validate=True)
            except (binascii.Error, ValueError):
                raise GatewayError(400, f"{where}.content is not base64") from None
            total += len(data)
            if total > max_bytes:
                raise GatewayError(
                    413,
                    f"the model definition is over {max_bytes / 2**20:g} MiB; "
                    "keep data and checkpoints out of it (.detignore)",
                )
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


async def create_experiment(request: Request) -> JSONResponse:
    fields = await body(request, _CREATE_FIELDS)
    c = caller(request)
    if fields.get("template"):
        raise GatewayError(501, "pedl has no config templates; put the settings in the config")
    if fields.get("unmanaged"):
        raise GatewayError(501, "pedl has no unmanaged experiments; run it as a pedl experiment")
    if fields.get("parentId"):
        raise GatewayError(501, "pedl cannot fork an experiment by id; create one from its config")
    if fields.get("projectId") not in (None, 0, 1):
        raise GatewayError(404, f"project {fields['projectId']} not found; pedl has project 1 only")
    config = fields.get("config") or ""
    if not config.strip():
        raise GatewayError(400, 'give the experiment config as "config" (YAML text)')
    try:
        parsed = experiment_config.parse_experiment_config(config, filename="config")
    except ConfigError as e:
        raise GatewayError(400, str(e)) from None
    archive = model_definition_archive(fields.get("modelDefinition") or [])
    if fields.get("validateOnly"):
        checked = scheduler_pb2.Experiment(
            config_yaml=config, name=parsed.name or "", config_document=carried.masked_json(parsed)
        )
        return ok(
            {
                "experiment": experiment_json(checked),
                "config": experiment_json(checked)["config"],
                "warnings": [],
            }
        )
    # Determined's request names no directory: the context is the package "model_def" (pedl's
    # name for a context without one), and the config's entrypoint finds the Trial in it.
    message = scheduler_pb2.CreateExperimentRequest(
        config_yaml=config,
        model_definition=archive,
        model_definition_name="model_def",
        paused=fields.get("activate") is False,  # `--paused`: created PAUSED, no trial starts first
        queue_if_no_agent_fits=True,  # as Determined's master: queued, with a warning
    )
    reply = await run_in_threadpool(c.call, "CreateExperiment", message)
    value = experiment_json(reply.experiment)
    # Determined's one launch warning: its client prints that the job needs more slots than the
    # cluster has now (the scheduler's own line says which, in its log).
    warnings = ["LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED"] if reply.warnings else []
    return ok({"experiment": value, "config": value["config"], "warnings": warnings})


def model_definition(request: Request) -> JSONResponse:
    """`GET /api/v1/experiments/{id}/model_def`: the context as base64 tar.gz (`b64Tgz`)."""
    reply = caller(request).call(
        "GetModelDefinition",
        scheduler_pb2.GetModelDefinitionRequest(experiment_id=path_id(request, "experimentId")),
    )
    return ok({"b64Tgz": base64.b64encode(reply.model_definition).decode()})


def default_workspace(request: Request) -> JSONResponse:
    caller(request)
    return ok(
        {
            "workspace": {
                "id": 1,
                "name": "Uncategorized",
                "archived": False,
                "username": "",
                "immutable": True,
                "numProjects": 1,
                "pinned": False,
                "userId": 0,
                "numExperiments": 0,
                "state": "WORKSPACE_STATE_UNSPECIFIED",
                "errorMessage": "",
                "agentUserGroup": None,
                "checkpointStorageConfig": None,
                "defaultComputePool": "default",
                "defaultAuxPool": "default",
            }
        }
    )


def default_project(request: Request) -> JSONResponse:
    caller(request)
    return ok(
        {
            "project": {
                "id": 1,
                "name": "Uncategorized",
                "workspaceId": 1,
                "workspaceName": "Uncategorized",
                "description": "",
                "lastExperimentStartedAt": None,
                "notes": [],
                "numActiveExperiments": 0,
                "numExperiments": 0,
                "archived": False,
                "username": "",
                "immutable": True,
                "userId": 0,
                "state": "WORKSPACE_STATE_UNSPECIFIED",
                "errorMessage": "",
                "key": "UNC",
            }
        }
    )


def _metric_names(c: Caller, experiment_id: int) -> set[tuple[str, str]]:
    """(group, name) of every metric the experiment's trials stored, read as the metric-names stream
    reads them (`MetricNames` over each trial's rows cut to `NAME_POINTS`): a metric reported only
    between a trial's first and last report has its columns too."""
    request = scheduler_pb2.GetMetricsRequest(experiment_id=experiment_id, max_points=NAME_POINTS)
    names = MetricNames("")
    try:
        for reply in c.gateway.stream(c.token, "GetMetrics", request):
            names.absorb(reply, {})
    except grpc.RpcError as e:
        raise error_of(e) from None
    return names.seen


def _columns(c: Caller) -> list[dict[str, Any]]:
    spaces: list[dict[str, Any]] = []
    names: set[tuple[str, str]] = set()
    message = scheduler_pb2.ListExperimentsRequest(page_size=500, with_config_document=True)
    while True:
        reply = c.call("ListExperiments", message)
        for experiment in reply.experiments:
            spaces.append(configs.hparam_space(configs.experiment_config(experiment)) or {})
            names |= _metric_names(c, experiment.id)
        if not reply.next_page_token:
            return project_columns(spaces, names)
        message.page_token = reply.next_page_token


async def project_columns_route(request: Request) -> JSONResponse:
    """`GET /api/v1/projects/{id}/columns` for pedl's one project: the columns of the experiments
    the caller may read (Determined's GetProjectColumns; `tableType` changes nothing here)."""
    project = path_id(request, "id")
    if project != 1:
        raise GatewayError(404, f"project {project} not found: pedl has one project, 1 (Uncategorized)")
    c = caller(request)
    return ok({"columns": await run_in_threadpool(_columns, c)})
