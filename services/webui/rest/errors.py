"""Determined's error shape: grpc-gateway's `{"code": <gRPC code>, "message": ..., "details": []}`
with the HTTP status grpc-gateway gives that code, plus the master's `{"error": {"error": ...}}`
that Determined's client reads for statuses other than 401/403/404, so it prints one line either way."""

from __future__ import annotations

from starlette.responses import JSONResponse

from pedl_webui.gateway import GatewayError

# HTTP status -> the gRPC code grpc-gateway maps to it (runtime.HTTPStatusFromCode, inverted).
_GRPC_CODE = {
    400: 3,
    401: 16,
    403: 7,
    404: 5,
    405: 12,
    409: 9,
    413: 8,
    415: 3,
    422: 3,
    429: 8,
    501: 12,
    503: 14,
}

_REASON = {
    3: "InvalidArgument",
    5: "NotFound",
    7: "PermissionDenied",
    8: "ResourceExhausted",
    9: "FailedPrecondition",
    12: "Unimplemented",
    13: "Internal",
    14: "Unavailable",
    16: "Unauthenticated",
}


def is_rest(path: str) -> bool:
    return path.startswith("/api/v1/") or path in ("/api/v1", "/info", "/tasks")


def response(status: int, message: str) -> JSONResponse:
    code = _GRPC_CODE.get(status, 13 if status >= 500 else 2)
    body = {
        "code": code,
        "message": message,
        "details": [],
        "error": {"code": code, "reason": _REASON.get(code, "Unknown"), "error": message},
    }
    return JSONResponse(body, status_code=status)


def lacking(what: str) -> GatewayError:
    """What Determined has and pedl does not: one line the client prints."""
    return GatewayError(501, f"pedl has no {what}; this Determined API is not served by a pedl cluster")


def bad_request(message: str) -> GatewayError:
    return GatewayError(400, message)
