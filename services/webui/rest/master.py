"""`/info`, `/api/v1/master(/config)`, logins and users, as Determined's clients call them."""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl import __version__
from pedl.v1 import auth_pb2, scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.common import body, bool_param, caller, int_param, ok, page

# The Determined API these routes implement, reported as the master's version (Determined's client
# compares it with its own); pedl's own version is in `/api/v1/master/config`.
API_VERSION = "0.38.1"


def _master_info(request: Request) -> dict[str, Any]:
    info = caller_free_info(request)
    return {
        "version": API_VERSION,
        "masterId": info.cluster_id,
        "clusterId": info.cluster_id,
        "clusterName": "pedl",
        "telemetryEnabled": False,
        "ssoProviders": [],
        "externalLoginUri": "",
        "externalLogoutUri": "",
        "branding": "determined",
        "rbacEnabled": False,
        "strictJobQueueControl": False,
        "userManagementEnabled": True,
        "featureSwitches": [],
        "hasCustomLogo": False,
    }


def caller_free_info(request: Request) -> scheduler_pb2.GetClusterInfoResponse:
    """The scheduler's cluster info (a token when there is one; `/info` is asked before login)."""
    gateway = request.app.state.gateway
    header = request.headers.get("authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else ""
    try:
        return gateway.call(token, "GetClusterInfo", scheduler_pb2.GetClusterInfoRequest())
    except GatewayError as e:
        if e.status != 401:
            raise
        return scheduler_pb2.GetClusterInfoResponse(version=__version__)


def info(request: Request) -> JSONResponse:
    return ok(_master_info(request))


def master(request: Request) -> JSONResponse:
    caller(request)
    return ok(_master_info(request))


def master_config(request: Request) -> JSONResponse:
    c = caller(request)
    whoami = c.call("WhoAmI", auth_pb2.WhoAmIRequest())
    if not whoami.user.admin:
        raise GatewayError(403, "only an admin can read the master's config")
    cluster = c.call("GetClusterInfo", scheduler_pb2.GetClusterInfoRequest())
    config = {
        "cluster_name": "pedl",
        "checkpoint_storage": {"type": "pedl_checkpoint_store", "address": cluster.checkpoint_store_address},
        "resource_manager": {"type": "agent", "default_compute_resource_pool": "default"},
        "resource_pools": [{"pool_name": "default"}],
        "scheduler": {"type": "fair_share"},
        "version": __version__,
        # The scheduler's own settings, as `det master config` of pedl's CLI shows them.
        "scheduler_settings": json.loads(
            c.call("GetMasterConfig", scheduler_pb2.GetMasterConfigRequest()).config_json or "{}"
        ),
    }
    return ok({"config": config})


def user_json(user: auth_pb2.User) -> dict[str, Any]:
    """Determined's v1User; `id` is the user's stable id (absent where the scheduler sent none)."""
    value: dict[str, Any] = {
        "username": user.username,
        "admin": user.admin,
        "active": user.active or not user.created_at,
        "displayName": user.display_name,
        "remote": False,
        "modifiedAt": user.created_at or None,
    }
    if user.id:
        value["id"] = user.id
    return value


async def login(request: Request) -> JSONResponse:
    fields = await body(request, {"username": str, "password": str, "isHashed": bool})
    username = fields.get("username") or ""
    if not username:
        raise GatewayError(400, 'give a "username"')
    gateway = request.app.state.gateway
    password, hashed = fields.get("password") or "", bool(fields.get("isHashed"))
    client = request.client.host if request.client else ""
    reply = await run_in_threadpool(gateway.login, username, password, hashed, f"rest-{client}")
    return ok({"token": reply.token, "user": user_json(reply.user)})


async def logout(request: Request) -> JSONResponse:
    c = caller(request)
    await run_in_threadpool(c.gateway.logout, c.token)
    return ok({})


def _users(request: Request) -> list[auth_pb2.User]:
    return list(caller(request).call("ListUsers", auth_pb2.ListUsersRequest()).users)


def me(request: Request) -> JSONResponse:
    c = caller(request)
    user = c.call("WhoAmI", auth_pb2.WhoAmIRequest()).user
    for u in _users(request):
        if u.username == user.username:
            return ok({"user": user_json(u)})
    return ok({"user": user_json(user)})


def users(request: Request) -> JSONResponse:
    """Determined's GetUsers: its `active`, `admin` and `name` (part of the username) filters, as
    `det user ls` sends `active=true` to leave deactivated users out."""
    rows = [user_json(u) for u in _users(request)]
    active, admin = bool_param(request, "active"), bool_param(request, "admin")
    name = (request.query_params.get("name") or "").lower()
    rows = [
        r
        for r in rows
        if (active is None or r["active"] == active)
        and (admin is None or r["admin"] == admin)
        and name in r["username"].lower()
    ]
    offset, limit = int_param(request, "offset", 0, -(2**31)), int_param(request, "limit", 0)
    return ok(page(rows, offset, limit, "users"))


def user_by_name(request: Request) -> JSONResponse:
    name = request.path_params["username"]
    for u in _users(request):
        if u.username == name:
            return ok({"user": user_json(u)})
    raise GatewayError(404, f"user {name!r} not found")


def _user_by_id(request: Request, ident: int) -> auth_pb2.User:
    for u in _users(request):
        if u.id == ident:
            return u
    raise GatewayError(404, f"user {ident} not found")


def user_by_id(request: Request) -> JSONResponse:
    ident = request.path_params["userId"]
    return ok({"user": user_json(_user_by_id(request, ident))})


async def create_user(request: Request) -> JSONResponse:
    fields = await body(request, {"user": dict, "password": str, "isHashed": bool})
    user = fields.get("user") or {}
    username, admin = user.get("username"), user.get("admin", False)
    if not isinstance(username, str) or not username:
        raise GatewayError(400, 'give "user": {"username": ...}')
    if not isinstance(admin, bool):
        raise GatewayError(400, 'field "user.admin" must be a boolean')
    if user.get("remote"):
        raise GatewayError(400, "pedl has no remote (SSO) users; give the user a password")
    password = fields.get("password") or ""
    if not password:
        raise GatewayError(400, "pedl needs a password for every user; give one (det user create --password)")
    link = _agent_user(user.get("agentUserGroup"))
    c = caller(request)
    message = auth_pb2.CreateUserRequest(
        username=username, password=password, admin=admin, hashed=bool(fields.get("isHashed"))
    )
    created = (await run_in_threadpool(c.call, "CreateUser", message)).user
    value = user_json(created)
    if link is not None:
        linked = auth_pb2.LinkAgentUserRequest(username=username, agent_user=link)
        await run_in_threadpool(c.call, "LinkAgentUser", linked)
        value["agentUserGroup"] = user["agentUserGroup"]
    return ok({"user": value})


def _agent_user(group: Any) -> auth_pb2.AgentUser | None:
    """Determined's `agentUserGroup` of a new user: all four of uid, gid, user and group (checked
    before the user is created, so a bad one creates nothing); the user's trials run as them."""
    if group is None:
        return None
    group = group if isinstance(group, dict) else {}
    uid, gid = group.get("agentUid"), group.get("agentGid")
    user, unix_group = group.get("agentUser"), group.get("agentGroup")
    numbers_ok = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (uid, gid))
    if not numbers_ok or not all(isinstance(n, str) and n for n in (user, unix_group)):
        raise GatewayError(
            400, '"agentUserGroup" needs agentUid and agentGid (above 0), agentUser and agentGroup'
        )
    return auth_pb2.AgentUser(uid=uid, gid=gid, user=user, group=unix_group)


async def patch_user(request: Request) -> JSONResponse:
    """A username or admin change (admins only), password, display name or active change (what
    pedl's users have); other fields are refused by name. The new username goes first, so a refused rename
    (the name is taken) changes nothing else."""
    fields = await body(
        request,
        {
            "password": str,
            "isHashed": bool,
            "active": bool,
            "admin": bool,
            "displayName": str,
            "username": str,
            "agentUserGroup": dict,
            "remote": bool,
        },
    )
    if fields.get("agentUserGroup") is not None:
        raise GatewayError(400, 'pedl cannot change a user\'s "agentUserGroup"')
    if fields.get("remote"):  # `remote: false` is every pedl user already
        raise GatewayError(400, "pedl has no remote (SSO) users")
    c = caller(request)
    ident = request.path_params["userId"]
    target = await run_in_threadpool(_user_by_id, request, ident)
    if fields.get("username") is not None and fields["username"] != target.username:
        renamed = auth_pb2.RenameUserRequest(username=target.username, new_username=fields["username"])
        target = (await run_in_threadpool(c.call, "RenameUser", renamed)).user
    if fields.get("password") is not None:
        # Determined's clients send no current password: a recent login stands in for it.
        message = auth_pb2.SetUserPasswordRequest(
            username=target.username,
            password=fields["password"],
            hashed=bool(fields.get("isHashed")),
            recent_login_suffices=True,
        )
        await run_in_threadpool(c.call, "SetUserPassword", message)
    if fields.get("displayName") is not None:
        named = auth_pb2.SetUserDisplayNameRequest(
            username=target.username, display_name=fields["displayName"]
        )
        await run_in_threadpool(c.call, "SetUserDisplayName", named)
    if fields.get("active") is not None:
        active = auth_pb2.SetUserActiveRequest(username=target.username, active=fields["active"])
        await run_in_threadpool(c.call, "SetUserActive", active)
    if fields.get("admin") is not None and fields["admin"] != target.admin:
        admin = auth_pb2.SetUserAdminRequest(username=target.username, admin=fields["admin"])
        await run_in_threadpool(c.call, "SetUserAdmin", admin)
    return ok({"user": user_json(await run_in_threadpool(_user_by_id, request, ident))})
