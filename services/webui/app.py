"""The HTTP front of a pedl cluster, one Starlette app: the web UI (pages, their JSON, live
streams) and Determined's REST API `/api/v1` for Determined's own `det` and SDK.

Both call the scheduler over gRPC with the caller's own token (`Gateway`), so the scheduler's
authorization table decides for every door alike; this app holds no credential of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import Response

from pedl import _log
from pedl_webui import pages
from pedl_webui.gateway import Gateway, GatewayError
from pedl_webui.rest import errors as rest_errors
from pedl_webui.rest.routes import routes as rest_routes

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
log = _log.get_logger(service="webui")


class _Headers(BaseHTTPMiddleware):
    """Security headers on every answer; nothing but static files is cached."""

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        response.headers.setdefault("Cache-Control", "no-store")
        return response


def _error(request: Request, status: int, message: str) -> Response:
    path = request.url.path
    if rest_errors.is_rest(path):
        return rest_errors.response(status, message)
    if path.startswith("/api/") or status != 404:
        return pages.json_response(status, {"error": message})
    return pages.page("404.html", status=404)


async def _gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    return _error(request, exc.status, exc.message)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return _error(request, 404, f"nothing at {request.url.path}")
    if exc.status_code == 405:
        return _error(request, 405, f"{request.method} is not allowed on {request.url.path}")
    return _error(request, exc.status_code, str(exc.detail))


async def _crash(request: Request, exc: Exception) -> Response:
    """A bug here is a 500 with a log line, never a dropped connection."""
    log.error("request failed", path=request.url.path, error=repr(exc), exc_info=exc)
    return _error(request, 500, "the web UI failed on this request; see its log")


def build_app(gateway: Gateway, secure_cookie: bool = False) -> Starlette:
    app = Starlette(
        routes=[*rest_routes(), *pages.routes()],
        middleware=[Middleware(_Headers)],
        exception_handlers={
            GatewayError: _gateway_error,
            HTTPException: _http_error,
            Exception: _crash,
        },
    )
    app.state.gateway = gateway
    app.state.secure_cookie = secure_cookie
    return app
