"""The web UI's own routes: its pages, their JSON API (`/api/...`, outside Determined's `/api/v1`),
live event streams (Server-Sent Events) and checkpoint downloads.

Every request that reads or acts goes to the scheduler with the signed-in user's token (`Gateway`);
the session is that token in an HttpOnly, SameSite=Strict cookie, so page scripts never see it and
other sites cannot send it. Plain (sync) handlers run on the server's thread pool, as gRPC calls block.
"""

from __future__ import annotations

import json
import mimetypes
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import grpc
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from pedl import downsample
from pedl._metrics import BUILTIN_GROUPS, check_group
from pedl.log_filter import LOG_LEVELS, log_matches
from pedl.v1 import scheduler_pb2
from pedl_webui import api, downloads, trial_columns
from pedl_webui.gateway import Gateway, GatewayError, error_of
from pedl_webui.redirects import safe_next
from pedl_webui.relay import Item, open_relay
from pedl_webui.views import dumps

STATIC = Path(__file__).resolve().parent / "static"
COOKIE = "pedl_session"
# A stream with nothing to send writes a comment this often, so a closed tab is noticed.
KEEPALIVE_SECONDS = 15.0
# A trial page asks for its log's newest lines (?tail=), at most these many: the rest is a download.
MAX_LOG_TAIL = 10_000
MAX_BODY = 64 * 1024
_PAGES = {"/experiments": "experiments.html", "/cluster": "cluster.html"}


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


def json_response(status: int, value: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(value), status, headers, media_type="application/json")


def page(name: str, status: int = 200) -> Response:
    return Response((STATIC / name).read_bytes(), status, media_type="text/html; charset=utf-8")


def redirect(location: str, headers: dict[str, str] | None = None) -> Response:
    return Response(b"", 303, {"Location": location, **(headers or {})})


def session(request: Request) -> str | None:
    token = request.cookies.get(COOKIE)
    return token or None


def _target(request: Request) -> tuple[str, int]:
    """The (experiments|trials, id) a route names; anything else is not found."""
    kind, ident = request.path_params.get("kind", "trials"), request.path_params["ident"]
    if kind not in ("experiments", "trials") or not 0 < ident < 10**9:
        raise GatewayError(404, f"nothing at {request.url.path}")
    return kind, ident


def _required_session(request: Request) -> str:
    token = session(request)
    if token is None:
        raise GatewayError(401, "not logged in")
    return token


def _cookie(request: Request, token: str, max_age: int | None = None) -> dict[str, str]:
    parts = [f"{COOKIE}={token}", "Path=/", "HttpOnly", "SameSite=Strict"]
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    if request.app.state.secure_cookie:
        parts.append("Secure")
    return {"Set-Cookie": "; ".join(parts)}


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object; a form another site could post (not JSON) is refused (CORS)."""
    if not (request.headers.get("content-type") or "").startswith("application/json"):
        raise GatewayError(415, "send application/json")
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise GatewayError(413, "request body too large")
    try:
        value = json.loads(raw or b"{}")
    except ValueError:
        raise GatewayError(400, "the request body is not JSON") from None
    if not isinstance(value, dict):
        raise GatewayError(400, "the request body must be a JSON object")
    return value


# --- pages ------------------------------------------------------------------------------------
def login_page(request: Request) -> Response:
    return page("login.html")


def favicon(request: Request) -> Response:
    return Response(b"", 204, media_type="image/x-icon")


def healthz(request: Request) -> Response:
    return Response(b"ok\n", media_type="text/plain")


def home(request: Request) -> Response:
    if session(request) is None:
        return redirect("/login?next=/")
    return redirect("/experiments")


def list_page(request: Request) -> Response:
    path = request.url.path
    if session(request) is None:
        return redirect(f"/login?next={quote(path)}")
    return page(_PAGES[path])


def detail_page(request: Request) -> Response:
    """An experiment's or a trial's page; a 404 page for an unknown id (a session that has ended
    shows as a 401 from the check here, which sends the browser to log in again)."""
    path, kind, ident = request.url.path, request.path_params["kind"], request.path_params["ident"]
    if kind not in ("experiments", "trials"):
        raise GatewayError(404, f"no page at {path}")
    token = session(request)
    if token is None:
        return redirect(f"/login?next={quote(path)}")
    if not ident.isdigit() or len(ident) >= 10:
        raise GatewayError(404, f"no page at {path}")
    try:
        api.exists(gateway_of(request), token, kind, int(ident))
    except GatewayError as e:
        if e.status == 401:
            return redirect(f"/login?next={quote(path)}")
        raise
    return page("experiment.html" if kind == "experiments" else "trial.html")


def compare_page(request: Request) -> Response:
    """Trials of one experiment side by side; which ones is the page's query (?trials=1,2)."""
    path, ident = request.url.path, request.path_params["ident"]
    token = session(request)
    if token is None:
        return redirect(f"/login?next={quote(path)}")
    if not 0 < ident < 10**9:
        raise GatewayError(404, f"no page at {path}")
    api.exists(gateway_of(request), token, "experiments", ident)
    return page("compare.html")


def static(request: Request) -> Response:
    target = (STATIC / request.path_params["rel"]).resolve()
    if STATIC not in target.parents or not target.is_file() or target.suffix == ".html":
        raise GatewayError(404, "no such file")
    content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    if content_type.startswith("text/") or content_type.endswith("javascript"):
        content_type += "; charset=utf-8"
    return Response(target.read_bytes(), media_type=content_type, headers={"Cache-Control": "max-age=300"})


# --- the pages' JSON API ----------------------------------------------------------------------
async def login(request: Request) -> Response:
    body = await json_body(request)
    username, password = body.get("username"), body.get("password")
    if not isinstance(username, str) or not isinstance(password, str) or not username:
        raise GatewayError(400, "give a username and a password")
    browser = request.client.host if request.client else ""
    reply = await run_in_threadpool(gateway_of(request).login, username, password, False, browser)
    user = {"username": reply.user.username, "admin": reply.user.admin}
    # Where the page goes next: only a path on this site (redirects.safe_next), whatever `next` says.
    return json_response(
        200, {"user": user, "next": safe_next(body.get("next"))}, _cookie(request, reply.token)
    )


async def logout(request: Request) -> Response:
    await json_body(request)
    token = _required_session(request)
    await run_in_threadpool(gateway_of(request).logout, token)
    return json_response(200, {"ok": True}, _cookie(request, "", max_age=0))


def me(request: Request) -> Response:
    user = gateway_of(request).whoami(_required_session(request))
    if user is None:
        raise GatewayError(401, "the session has ended; log in again")
    return json_response(200, {"username": user.username, "admin": user.admin})


def experiments(request: Request) -> Response:
    token = _required_session(request)
    query = {k: request.query_params.getlist(k) for k in request.query_params}
    return json_response(200, api.experiments(gateway_of(request), token, api.list_request(query)))


def cluster(request: Request) -> Response:
    return json_response(200, api.cluster(gateway_of(request), _required_session(request)))


def detail(request: Request) -> Response:
    """An experiment's page data (of ?trials=3,5 only, if given: the compare page; its trials as
    columns with ?columns=1: the experiment page), or a trial's."""
    token, (kind, ident) = _required_session(request), _target(request)
    gateway = gateway_of(request)
    if kind == "experiments":
        columns = request.query_params.get("columns", "0")
        if columns not in ("0", "1"):
            raise GatewayError(400, f"columns must be 0 or 1, not {columns[:20]!r}")
        value = api.experiment(gateway, token, ident, _trial_ids(request.query_params.get("trials")))
        if columns == "1":  # the experiment page's compact form (trial_columns)
            value = trial_columns.with_columns(value)
    else:
        value = api.trial(gateway, token, ident)
    return json_response(200, value)


async def act(request: Request) -> Response:
    await json_body(request)
    token = _required_session(request)
    ident, action = _target(request)[1], request.path_params["action"]
    if action not in api.ACTIONS:
        raise GatewayError(404, f"no action at {request.url.path}")
    result = await run_in_threadpool(api.act, gateway_of(request), token, ident, action)
    return json_response(200, result)


async def importance(request: Request) -> Response:
    token, ident = _required_session(request), _target(request)[1]
    return json_response(200, await run_in_threadpool(api.importance, gateway_of(request), token, ident))


async def notes(request: Request) -> Response:
    body = await json_body(request)
    token, ident = _required_session(request), _target(request)[1]
    result = await run_in_threadpool(api.set_notes, gateway_of(request), token, ident, body.get("notes"))
    return json_response(200, result)


async def metrics_events(request: Request) -> Response:
    """Curves, following. An experiment's are cut by the scheduler to ?max_points= per trial (first,
    last, min and max kept; 2 to 200, default 200), of ?trials=3,5 only if given; a trial's are whole,
    its training and validation rows or, with ?group=NAME, that custom metric group's."""
    token, (kind, ident) = _required_session(request), _target(request)
    if kind == "trials":
        group = request.query_params.get("group", "")
        metrics = scheduler_pb2.GetMetricsRequest(trial_id=ident, follow=True, group=_group(group))
    else:
        metrics = scheduler_pb2.GetMetricsRequest(
            experiment_id=ident,
            follow=True,
            max_points=_max_points(request.query_params.get("max_points")),
            trial_ids=_trial_ids(request.query_params.get("trials")),
        )
    return await _events(request, token, "GetMetrics", metrics)


def _group(name: str) -> str:
    """ "" (training and validation) or a custom group's name; else 400 saying what a name may be."""
    if name in BUILTIN_GROUPS:
        raise GatewayError(400, f"group: the {name} rows come without ?group= (it names a custom group)")
    try:
        return check_group(name) if name else ""
    except ValueError as e:
        raise GatewayError(400, f"group: {e}") from None


def _max_points(text: str | None) -> int:
    if text is None:
        return downsample.MAX_POINTS
    if not text.isdigit() or not 2 <= int(text) <= downsample.MAX_POINTS:
        raise GatewayError(400, f"max_points must be 2 to {downsample.MAX_POINTS}, not {text[:20]!r}")
    return int(text)


def _trial_ids(text: str | None) -> list[int]:
    parts = (text or "").split(",") if text else []
    if not all(p.isdigit() and 0 < int(p) < 10**9 for p in parts):
        raise GatewayError(400, f"trials must be trial ids separated by commas, not {(text or '')[:40]!r}")
    return [int(p) for p in parts]


async def log_events(request: Request) -> Response:
    token = _required_session(request)
    after, tail = request.query_params.get("after", "0"), request.query_params.get("tail", "0")
    logs = scheduler_pb2.GetTrialLogsRequest(
        trial_id=_target(request)[1],
        follow=True,
        after_id=int(after) if after.isdigit() else 0,
        tail=min(int(tail), MAX_LOG_TAIL) if tail.isdigit() else 0,
    )
    return await _events(request, token, "GetTrialLogs", logs)


async def _events(request: Request, token: str, method: str, message: Any) -> Response:
    """Relays a following scheduler stream as SSE: `data` events, then `end` when it ends, or
    `failure` with the scheduler's words (a refusal before any event is a plain HTTP error)."""
    relay, first = await open_relay(gateway_of(request).stream(token, method, message), KEEPALIVE_SECONDS)

    async def body() -> AsyncIterator[bytes]:
        async for item in relay.items(first):
            yield _sse(item)

    return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})


def _sse(item: Item) -> bytes:
    if item.kind == "message":
        return f"data: {api.event_json(item.value)}\n\n".encode()
    if item.kind == "end":
        return b"event: end\ndata: {}\n\n"
    if item.kind == "error":
        message = json.dumps({"error": item.value.message, "status": item.value.status})
        return f"event: failure\ndata: {message}\n\n".encode()
    return b": keepalive\n\n"


def log_file(request: Request) -> Response:
    """The whole log as text (the page keeps only its newest lines), streamed as it is read; with
    ?q=TEXT&level=LEVEL&rank=N only the lines the page's filter shows."""
    token, trial_id = _required_session(request), _target(request)[1]
    params = request.query_params
    rank = params.get("rank", "")
    if rank and not rank.isdigit():
        raise GatewayError(400, f"rank must be a whole number, not {rank[:20]!r}")
    level = params.get("level", "").upper()
    if level and level not in LOG_LEVELS:
        raise GatewayError(400, f"level must be one of {', '.join(LOG_LEVELS)}")
    criteria = (params.get("q", ""), level, int(rank) if rank else None)
    call = gateway_of(request).stream(
        token, "GetTrialLogs", scheduler_pb2.GetTrialLogsRequest(trial_id=trial_id, follow=False)
    )
    try:
        first = next(call, None)
    except grpc.RpcError as e:
        raise error_of(e) from None

    def body() -> Iterator[bytes]:
        try:
            if first is not None:
                yield _lines(first, *criteria)
            for message in call:
                yield _lines(message, *criteria)
        except grpc.RpcError:
            yield b"\n[the log was cut short: the scheduler stopped answering]\n"
        finally:
            call.cancel()

    disposition = {"Content-Disposition": f'attachment; filename="trial-{trial_id}.log"'}
    return StreamingResponse(body(), media_type="text/plain; charset=utf-8", headers=disposition)


def _lines(message: Any, text: str = "", level: str = "", rank: int | None = None) -> bytes:
    return "".join(
        line.message.rstrip("\n") + "\n"
        for line in message.lines
        if log_matches(line.message, text, level, rank)
    ).encode()


def checkpoint_download(request: Request) -> Response:
    """The checkpoint as a .tar.gz (or, with ?file=PATH, that one file of it), whole before any
    byte goes out, so failures stay errors."""
    token, uuid = _required_session(request), request.path_params["uuid"]
    one = request.query_params.get("file", "")
    spool = tempfile.TemporaryFile()
    try:
        if one:
            downloads.write_file(gateway_of(request), token, uuid, one, spool)
        else:
            downloads.write_tar(gateway_of(request), token, uuid, spool)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise

    def body() -> Iterator[bytes]:
        with spool:
            while chunk := spool.read(1 << 20):
                yield chunk

    if one:
        name = quote(Path(one).name)
        headers = {"Content-Disposition": f"attachment; filename*=UTF-8''{name}"}
        return StreamingResponse(body(), media_type="application/octet-stream", headers=headers)
    headers = {"Content-Disposition": f'attachment; filename="{uuid}.tar.gz"'}
    return StreamingResponse(body(), media_type="application/gzip", headers=headers)


def routes() -> list[BaseRoute]:
    """The web UI's routes; Determined's `/api/v1` comes before these in the app."""
    ident = "{ident:int}"
    return [
        Route("/static/{rel:path}", static, methods=["GET", "HEAD"]),
        Route("/login", login_page, methods=["GET", "HEAD"]),
        Route("/favicon.ico", favicon, methods=["GET", "HEAD"]),
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/", home, methods=["GET", "HEAD"]),
        Route("/experiments", list_page, methods=["GET", "HEAD"]),
        Route("/cluster", list_page, methods=["GET", "HEAD"]),
        Route("/api/login", login, methods=["POST"]),
        Route("/api/logout", logout, methods=["POST"]),
        Route("/api/me", me, methods=["GET", "HEAD"]),
        Route("/api/experiments", experiments, methods=["GET", "HEAD"]),
        Route("/api/cluster", cluster, methods=["GET", "HEAD"]),
        Route(f"/api/{{kind:str}}/{ident}", detail, methods=["GET", "HEAD"]),
        Route(f"/api/experiments/{ident}/notes", notes, methods=["PUT"]),
        Route(f"/api/experiments/{ident}/importance", importance, methods=["GET", "HEAD"]),
        Route(f"/api/experiments/{ident}/{{action:str}}", act, methods=["POST"]),
        Route(f"/api/{{kind:str}}/{ident}/metrics", metrics_events, methods=["GET"]),
        Route(f"/api/trials/{ident}/logs", log_events, methods=["GET"]),
        Route(f"/api/trials/{ident}/logs.txt", log_file, methods=["GET", "HEAD"]),
        Route("/api/checkpoints/{uuid:str}/download", checkpoint_download, methods=["GET", "HEAD"]),
        Route(f"/experiments/{ident}/compare", compare_page, methods=["GET", "HEAD"]),
        Route("/{kind:str}/{ident:str}", detail_page, methods=["GET", "HEAD"]),
    ]
