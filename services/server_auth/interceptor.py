"""Authentication on a server, shared by the scheduler and the checkpoint store.

A grpc.aio interceptor reads `authorization: Bearer <token>`, asks the service's `authenticate`
who the caller is, and either refuses the call with that status or runs it with the caller
available to the servicer through `current_principal()`.
"""

from __future__ import annotations

import hmac
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import grpc
import grpc.aio

from pedl.auth.bearer import HEADER
from pedl_server_auth.principal import Denied, Principal, set_current_principal

OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    for key, value in metadata or ():
        if key.lower() == HEADER and isinstance(value, str):
            scheme, _, token = value.strip().partition(" ")
            return token.strip() or None if scheme.lower() == "bearer" else None
    return None


def is_secret(token: str, secret: str | None) -> bool:
    return secret is not None and hmac.compare_digest(token.encode(), secret.encode())


Authenticate = Callable[[str, "str | None"], Awaitable[Principal]]


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Health and reflection stay open (probes, `grpcurl list`); so do methods in `open_methods`."""

    def __init__(self, authenticate: Authenticate, open_methods: Iterable[str] = ()) -> None:
        self._authenticate = authenticate
        self._open = frozenset(open_methods)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(OPEN_PREFIXES) or method in self._open:
            return handler
        token = bearer_token(handler_call_details.invocation_metadata)
        try:
            principal = await self._authenticate(method, token)
        except Denied as e:
            return _rebuild(handler, _denier(e, handler.response_streaming))
        return _rebuild(handler, _with_principal(_behavior(handler), principal, handler.response_streaming))


def _behavior(handler: grpc.RpcMethodHandler) -> Callable[..., Any]:
    behavior = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    if behavior is None:
        raise ValueError("a gRPC method handler without a behavior")
    return behavior


def _denier(denied: Denied, streaming: bool) -> Callable:
    if streaming:

        async def deny_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await context.abort(denied.code, denied.message)
            yield  # pragma: no cover - abort raises

        return deny_stream

    async def deny(request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(denied.code, denied.message)

    return deny


def _with_principal(inner: Callable, principal: Principal, streaming: bool) -> Callable:
    if streaming and inspect.isasyncgenfunction(inner):

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            set_current_principal(principal)
            async for item in inner(request, context):
                yield item

        return stream

    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        set_current_principal(principal)
        return await inner(request, context)

    return call


def _rebuild(handler: grpc.RpcMethodHandler, behavior: Callable) -> grpc.RpcMethodHandler:
    make = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }[(handler.request_streaming, handler.response_streaming)]
    return make(
        behavior,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
