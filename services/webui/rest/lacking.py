"""Determined APIs for what pedl does not have: each answers in Determined's error shape with one
line naming what is missing, so Determined's client prints it instead of a parse error."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from pedl_webui.rest.errors import lacking

# URL prefix under /api/v1 -> what pedl lacks.
LACKING = {
    "notebooks": "notebooks",
    "shells": "shells",
    "commands": "commands",
    "tensorboards": "TensorBoard tasks served by the master (use `pedl tensorboard`)",
    "templates": "config templates",
    "models": "model registry",
    "webhooks": "webhooks",
    "groups": "user groups (RBAC)",
    "roles": "RBAC roles",
    "permissions": "RBAC permissions",
    "workspaces": "workspaces other than the default one",
    "projects": "projects other than the default one",
    "runs": "runs (Determined's flat runs view)",
    "searches": "searches (Determined's searches view)",
    "jobs": "job queue controls",
    "allocations": "allocations",
    "tasks": "generic tasks (pedl's tasks are its experiments' trials)",
    "config-policies": "config policies",
    "oauth": "OAuth clients",
}
_ALL = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def _refuse(request: Request) -> JSONResponse:
    first = request.url.path.removeprefix("/api/v1/").split("/", 1)[0]
    raise lacking(LACKING.get(first, first))


def routes() -> list[BaseRoute]:
    out: list[BaseRoute] = []
    for prefix in LACKING:
        out.append(Route(f"/api/v1/{prefix}", _refuse, methods=_ALL))
        out.append(Route(f"/api/v1/{prefix}/{{rest:path}}", _refuse, methods=_ALL))
    return out
