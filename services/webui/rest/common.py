"""What every `/api/v1` handler shares: the caller's token, strict request bodies, query values,
pagination objects and Determined's enum spellings for pedl's states."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from pedl import records
from pedl_webui.gateway import Gateway, GatewayError
from pedl_webui.relay import open_relay

MAX_BODY = 136 * 1024 * 1024  # a create request carries the model definition (base64)
KEEPALIVE_SECONDS = 3600.0  # the relay's quiet-spell tick; nothing is written for it
# Determined's spellings of pedl's experiment states (experimentv1State).
EXPERIMENT_STATE = {
    "ACTIVE": "STATE_ACTIVE",
    "PAUSED": "STATE_PAUSED",
    "COMPLETED": "STATE_COMPLETED",
    "CANCELED": "STATE_CANCELED",
    "ERROR": "STATE_ERROR",
    "STOPPING_CANCELED": "STATE_STOPPING_CANCELED",
    "STOPPING_COMPLETED": "STATE_STOPPING_COMPLETED",
    "STOPPING_ERROR": "STATE_STOPPING_ERROR",
}


@dataclass(frozen=True)
class Caller:
    """The request's gateway and the caller's own token (the scheduler decides what it may do)."""

    gateway: Gateway
    token: str

    def call(self, method: str, message: Any) -> Any:
        return self.gateway.call(self.token, method, message)


def caller(request: Request) -> Caller:
    """`Authorization: Bearer TOKEN` as Determined's clients send it (the web UI's cookie too)."""
    header = request.headers.get("authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else ""
    token = token or request.cookies.get("pedl_session", "")
    if not token:
        raise GatewayError(401, "no token: log in first (det user login)")
    gateway: Gateway = request.app.state.gateway
    return Caller(gateway, token)


class DeterminedJSON(JSONResponse):
    """Starlette's compact JSON, with NaN and infinities spelled as Determined's gateway spells
    them (strings), where Starlette's own encoder would fail the response."""

    def render(self, content: Any) -> bytes:
        return json_text(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def ok(value: Any, status: int = 200) -> JSONResponse:
    return DeterminedJSON(value, status_code=status)


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_text(value: Any, **options: Any) -> str:
    """`json.dumps`, but a NaN or infinity (a metric as reported) becomes "NaN", "Infinity" or
    "-Infinity", as protobuf's JSON writes them; a value without any is encoded in one pass."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False, **options)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return _NON_FINITE.get(repr(value), value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def state_name(value: int) -> str:
    short = records.experiment_state(value)
    return EXPERIMENT_STATE.get(short, "STATE_UNSPECIFIED")


async def body(request: Request, fields: dict[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """The JSON object sent, with only `fields` and each of its type; else one 400 naming what."""
    return check_fields(await json_body(request), fields)


async def json_body(request: Request) -> Any:
    """The JSON value sent ({} for an empty body); a 413 past MAX_BODY, a 400 for what is not JSON."""
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise GatewayError(413, f"the request body is {len(raw)} bytes; at most {MAX_BODY} are accepted")
    try:
        return json.loads(raw or b"{}")
    except ValueError as e:
        raise GatewayError(400, f"the request body is not JSON: {e}") from None


def check_fields(
    value: Any, fields: dict[str, type | tuple[type, ...]], where: str = "the request body"
) -> dict[str, Any]:
    """`value` as a JSON object with only `fields`, each of its type (or null); else one 400."""
    if not isinstance(value, dict):
        raise GatewayError(400, f"{where} must be a JSON object")
    for name, item in value.items():
        if name not in fields:
            raise GatewayError(400, f'unknown field "{name}" in {where}')
        expected = fields[name]
        if item is not None and (
            not isinstance(item, expected) or isinstance(item, bool) and expected is int
        ):
            kinds = expected if isinstance(expected, tuple) else (expected,)
            want = " or ".join(_JSON_TYPE.get(k, k.__name__) for k in kinds)
            raise GatewayError(400, f'field "{name}" must be {want}, got {json.dumps(item)[:40]}')
    return value


_JSON_TYPE = {
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    dict: "an object",
    list: "a list",
    float: "a number",
}


def int_param(request: Request, name: str, default: int, low: int = 0, high: int = 2**31 - 1) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise GatewayError(400, f"query parameter {name} must be an integer, got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise GatewayError(400, f"query parameter {name} must be {low}-{high}, got {value}")
    return value


def bool_param(request: Request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw.lower() not in ("true", "false", "1", "0"):
        raise GatewayError(400, f"query parameter {name} must be true or false, got {raw[:40]!r}")
    return raw.lower() in ("true", "1")


def path_id(request: Request, name: str) -> int:
    value: int = request.path_params[name]
    if not 0 < value < 2**31:
        raise GatewayError(404, f"{name} {value} not found")
    return value


def page(rows: list[Any], offset: int, limit: int, key: str, total: int | None = None) -> dict[str, Any]:
    """Determined's `pagination` object for `rows[offset:offset+limit]` (limit 0: all)."""
    total = len(rows) if total is None else total
    offset = max(0, total + offset) if offset < 0 else offset  # a negative offset counts from the end
    chosen = rows[offset : offset + limit] if limit > 0 else rows[offset:]
    pagination = {
        "offset": offset,
        "limit": limit,
        "startIndex": min(offset, total),
        "endIndex": min(offset + len(chosen), total),
        "total": total,
    }
    return {key: chosen, "pagination": pagination}


async def ndjson(
    call: Any, encode: Callable[[Any], str | Awaitable[str]], done: Callable[[], bool] = lambda: False
) -> StreamingResponse:
    """A scheduler stream as grpc-gateway streams: `encode` gives each message's lines, one
    `{"result": ...}` each; a failure is an `{"error": ...}` line (Determined's client parses every
    line, so there are no keepalive lines). The response ends when the stream does, or as soon as
    `done()` says so after a message (a head of `limit` lines: the call is cancelled then). An
    `encode` that must ask the scheduler more may be a coroutine function."""
    relay, first = await open_relay(call, KEEPALIVE_SECONDS)

    async def lines() -> AsyncIterator[bytes]:
        async for item in relay.items(first):
            if item.kind == "message":
                text = encode(item.value)
                if inspect.isawaitable(text):
                    text = await text
                if text:
                    yield text.encode()
                if done():
                    relay.cancel()
                    return
            elif item.kind == "error":
                error = {"code": 13, "message": item.value.message, "details": []}
                yield (json.dumps({"error": error}) + "\n").encode()

    return StreamingResponse(lines(), media_type="application/json")


def results(values: list[dict[str, Any]]) -> str:
    """ndjson lines, one `{"result": value}` each."""
    return "".join(json_text({"result": v}) + "\n" for v in values)
