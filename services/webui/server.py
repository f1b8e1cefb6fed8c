"""The web UI's HTTP server: pages, their JSON API and live event streams (Server-Sent Events).

Standard library only (`ThreadingHTTPServer`): a thread per open connection is what a team's
browsers need, and pedl gains no web framework to keep up. Every request that reads or acts goes
to the scheduler with the signed-in user's token (`Gateway`); the session is that token in an
HttpOnly, SameSite=Strict cookie, so page scripts never see it and other sites cannot send it.
"""

from __future__ import annotations

import itertools
import json
import mimetypes
import queue
import re
import shutil
import tempfile
import threading
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import grpc

from pedl import _log
from pedl.v1 import scheduler_pb2
from pedl_webui import api, downloads
from pedl_webui.gateway import Gateway, GatewayError, error_of
from pedl_webui.redirects import safe_next

STATIC = Path(__file__).resolve().parent / "static"
COOKIE = "pedl_session"
# A stream with nothing to send writes a comment this often, so a closed tab is noticed.
KEEPALIVE_SECONDS = 15.0
# A trial page asks for its log's newest lines (?tail=), at most these many: the rest is a download.
MAX_LOG_TAIL = 10_000
_PAGES = {
    "/experiments": "experiments.html",
    "/cluster": "cluster.html",
}
_DETAIL_PAGE = re.compile(r"^/(experiments|trials)/([^/]+)$")
_API = re.compile(r"^/api/(experiments|trials)/(\d{1,9})(?:/(metrics|logs|logs\.txt|kill|pause|activate))?$")
_DOWNLOAD = re.compile(r"^/api/checkpoints/([^/]+)/download$")
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
log = _log.get_logger(service="webui")


class WebServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], gateway: Gateway, secure_cookie: bool = False) -> None:
        super().__init__(address, Handler)
        self.gateway = gateway
        self.secure_cookie = secure_cookie


class Handler(BaseHTTPRequestHandler):
    server: WebServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
        log.debug("request", line=format % args)

    # --- plumbing ---------------------------------------------------------------------------
    def _send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in {**_SECURITY_HEADERS, **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _start_stream(self, content_type: str, headers: dict[str, str]) -> None:
        """A 200 whose body is written as it comes, of unknown length: the connection ends with it."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Connection", "close")
        for name, value in {**headers, **_SECURITY_HEADERS}.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True

    def _json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        from pedl_webui.views import dumps

        self._send(status, dumps(value).encode(), "application/json", headers)

    def _error(self, status: int, message: str) -> None:
        if self.path.startswith("/api/"):
            self._json(status, {"error": message})
        elif status == 404:
            self._page("404.html", status=404)
        else:
            self._json(status, {"error": message})

    def _page(self, name: str, status: int = 200) -> None:
        self._send(status, (STATIC / name).read_bytes(), "text/html; charset=utf-8")

    def _redirect(self, location: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(HTTPStatus.SEE_OTHER)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()

    def _token(self) -> str | None:
        try:
            jar = SimpleCookie(self.headers.get("Cookie", ""))
        except CookieError:
            return None
        morsel = jar.get(COOKIE)
        return morsel.value if morsel and morsel.value else None

    def _cookie(self, token: str, max_age: int | None = None) -> dict[str, str]:
        parts = [f"{COOKIE}={token}", "Path=/", "HttpOnly", "SameSite=Strict"]
        if max_age is not None:
            parts.append(f"Max-Age={max_age}")
        if self.server.secure_cookie:
            parts.append("Secure")
        return {"Set-Cookie": "; ".join(parts)}

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if length > 64 * 1024:
            raise GatewayError(413, "request body too large")
        raw = self.rfile.read(length) if length else b"{}"
        try:
            value = json.loads(raw or b"{}")
        except ValueError:
            raise GatewayError(400, "the request body is not JSON") from None
        if not isinstance(value, dict):
            raise GatewayError(400, "the request body must be a JSON object")
        return value

    # --- routing ----------------------------------------------------------------------------
    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path
        try:
            if path.startswith("/static/"):
                return self._static(path.removeprefix("/static/"))
            if path == "/login":
                return self._page("login.html")
            if path == "/favicon.ico":
                return self._send(204, b"", "image/x-icon")
            if path == "/healthz":
                return self._send(200, b"ok\n", "text/plain")
            token = self._token()
            if path.startswith("/api/"):
                if token is None:
                    raise GatewayError(401, "not logged in")
                return self._api_get(path, token)
            if token is None:
                return self._redirect(f"/login?next={quote(path)}")
            # A session that has ended shows as a 401 from the first call made with it: the id check
            # here, else the page's first API call (its script then goes to the login page).
            if path == "/":
                return self._redirect("/experiments")
            if path in _PAGES:
                return self._page(_PAGES[path])
            match = _DETAIL_PAGE.match(path)
            if match and match.group(2).isdigit() and len(match.group(2)) < 10:
                kind, ident = match.group(1), int(match.group(2))
                try:
                    api.exists(self.server.gateway, token, kind, ident)  # a 404 page for an unknown id
                except GatewayError as e:
                    if e.status == 401:
                        return self._redirect(f"/login?next={quote(path)}")
                    raise
                return self._page("experiment.html" if kind == "experiments" else "trial.html")
            raise GatewayError(404, f"no page at {path}")
        except GatewayError as e:
            self._error(e.status, e.message)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception:  # a bug here is a 500 with a log line, never a dropped connection
            log.exception("request failed", path=path)
            self._error(500, "the web UI failed on this request; see its log")

    def do_POST(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path
        try:
            # A JSON body is what a form on another site cannot send without our consent (CORS).
            if not (self.headers.get("Content-Type") or "").startswith("application/json"):
                raise GatewayError(415, "send application/json")
            body = self._body()
            if path == "/api/login":
                return self._login(body)
            token = self._token()
            if token is None:
                raise GatewayError(401, "not logged in")
            if path == "/api/logout":
                self.server.gateway.logout(token)
                return self._json(200, {"ok": True}, self._cookie("", max_age=0))
            match = _API.match(path)
            if match and match.group(1) == "experiments" and match.group(3) in ("kill", "pause", "activate"):
                result = api.act(self.server.gateway, token, int(match.group(2)), match.group(3))
                return self._json(200, result)
            raise GatewayError(404, f"no action at {path}")
        except GatewayError as e:
            self._error(e.status, e.message)
        except Exception:
            log.exception("request failed", path=path)
            self._error(500, "the web UI failed on this request; see its log")

    def _login(self, body: dict[str, Any]) -> None:
        username, password = body.get("username"), body.get("password")
        if not isinstance(username, str) or not isinstance(password, str) or not username:
            raise GatewayError(400, "give a username and a password")
        reply = self.server.gateway.login(username, password, browser=self.client_address[0])
        user = {"username": reply.user.username, "admin": reply.user.admin}
        self._json(200, {"user": user, "next": safe_next(body.get("next"))}, self._cookie(reply.token))

    def _api_get(self, path: str, token: str) -> None:
        gateway = self.server.gateway
        query = parse_qs(urlsplit(self.path).query)
        if path == "/api/me":
            user = gateway.whoami(token)
            if user is None:
                raise GatewayError(401, "the session has ended; log in again")
            return self._json(200, {"username": user.username, "admin": user.admin})
        if path == "/api/experiments":
            return self._json(200, api.experiments(gateway, token, api.list_request(query)))
        if path == "/api/cluster":
            return self._json(200, api.cluster(gateway, token))
        download = _DOWNLOAD.match(path)
        if download:
            return self._download(token, download.group(1))
        match = _API.match(path)
        if not match or match.group(3) in ("kill", "pause", "activate"):
            raise GatewayError(404, f"nothing at {path}")
        kind, ident, sub = match.group(1), int(match.group(2)), match.group(3)
        if sub is None:
            detail = (
                api.experiment(gateway, token, ident)
                if kind == "experiments"
                else api.trial(gateway, token, ident)
            )
            return self._json(200, detail)
        if sub == "metrics":
            metrics = (
                scheduler_pb2.GetMetricsRequest(experiment_id=ident, follow=True)
                if kind == "experiments"
                else scheduler_pb2.GetMetricsRequest(trial_id=ident, follow=True)
            )
            return self._events("GetMetrics", token, metrics)
        if kind == "trials" and sub == "logs":
            after, tail = query.get("after", ["0"])[0], query.get("tail", ["0"])[0]
            request = scheduler_pb2.GetTrialLogsRequest(
                trial_id=ident,
                follow=True,
                after_id=int(after) if after.isdigit() else 0,
                tail=min(int(tail), MAX_LOG_TAIL) if tail.isdigit() else 0,
            )
            return self._events("GetTrialLogs", token, request)
        if kind == "trials" and sub == "logs.txt":
            return self._log_file(token, ident)
        raise GatewayError(404, f"nothing at {path}")

    def _log_file(self, token: str, trial_id: int) -> None:
        """The whole log as text (the page keeps only its newest lines), streamed as it is read."""
        request = scheduler_pb2.GetTrialLogsRequest(trial_id=trial_id, follow=False)
        call = self.server.gateway.stream(token, "GetTrialLogs", request)
        try:
            first = next(call, None)
        except grpc.RpcError as e:
            raise error_of(e) from None
        self._start_stream(
            "text/plain; charset=utf-8",
            {"Content-Disposition": f'attachment; filename="trial-{trial_id}.log"'},
        )
        try:
            for message in itertools.chain([first] if first is not None else [], call):
                self.wfile.write("".join(line.message.rstrip("\n") + "\n" for line in message.lines).encode())
        except grpc.RpcError:
            self.wfile.write(b"\n[the log was cut short: the scheduler stopped answering]\n")
        finally:
            call.cancel()

    def _download(self, token: str, uuid: str) -> None:
        with tempfile.TemporaryFile() as spool:  # whole before any byte goes out: failures stay errors
            downloads.write_tar(self.server.gateway, token, uuid, spool)
            size = spool.tell()
            spool.seek(0)
            self.send_response(200)
            self.send_header("Content-Type", "application/gzip")
            self.send_header("Content-Disposition", f'attachment; filename="{uuid}.tar.gz"')
            self.send_header("Content-Length", str(size))
            for name, value in _SECURITY_HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            shutil.copyfileobj(spool, self.wfile)

    def _static(self, rel: str) -> None:
        target = (STATIC / rel).resolve()
        if STATIC not in target.parents or not target.is_file() or target.suffix == ".html":
            raise GatewayError(404, "no such file")
        content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if content_type.startswith("text/") or content_type.endswith("javascript"):
            content_type += "; charset=utf-8"
        self._send(200, target.read_bytes(), content_type, {"Cache-Control": "max-age=300"})

    # --- Server-Sent Events -----------------------------------------------------------------
    def _events(self, method: str, token: str, request: Any) -> None:
        """Relays a following scheduler stream as SSE: `data` events, then `end` when it ends, or
        `failure` with the scheduler's words (a 404 before any event is a plain 404)."""
        call = self.server.gateway.stream(token, method, request)
        items: queue.Queue[tuple[str, Any]] = queue.Queue()
        threading.Thread(target=_pump, args=(call, items), daemon=True).start()
        try:  # a refusal (unknown id, no permission) comes at once: answer it as a plain error
            kind, first = items.get(timeout=2.0)
        except queue.Empty:
            kind, first = "keepalive", None
        if kind == "error":
            call.cancel()
            raise first
        self._start_stream("text/event-stream", {"Cache-Control": "no-store"})
        try:
            while True:
                if kind == "message":
                    self.wfile.write(f"data: {api.event_json(first)}\n\n".encode())
                elif kind == "end":
                    self.wfile.write(b"event: end\ndata: {}\n\n")
                    return
                elif kind == "error":
                    message = json.dumps({"error": first.message, "status": first.status})
                    self.wfile.write(f"event: failure\ndata: {message}\n\n".encode())
                    return
                else:
                    self.wfile.write(b": keepalive\n\n")
                self.wfile.flush()
                try:
                    kind, first = items.get(timeout=KEEPALIVE_SECONDS)
                except queue.Empty:
                    kind, first = "keepalive", None
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        finally:
            call.cancel()


def _pump(call: Any, items: queue.Queue[tuple[str, Any]]) -> None:
    """Reads the gRPC stream on its own thread, so the HTTP side can write keepalives meanwhile."""
    try:
        for message in call:
            items.put(("message", message))
        items.put(("end", None))
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.CANCELLED:
            items.put(("error", error_of(e)))
