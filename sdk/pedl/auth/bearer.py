"""Client interceptors that add `authorization: Bearer <token>` to every call of a channel.

Interceptors rather than call credentials: gRPC only attaches call credentials on TLS channels,
and a development cluster may run plaintext. A call that already carries `authorization`
(a test presenting a deliberately wrong token) keeps its own.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import grpc
import grpc.aio

HEADER = "authorization"


def _metadata(existing: Any, token: str) -> list[tuple[str, str]]:
    items = list(existing or [])
    if any(k == HEADER for k, _ in items):
        return items
    return [*items, (HEADER, f"Bearer {token}")]


class _Details(
    namedtuple("_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    pass


class BearerInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def __init__(self, token: str) -> None:
        self._token = token

    def _details(self, d: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        return _Details(
            d.method,
            d.timeout,
            _metadata(d.metadata, self._token),
            d.credentials,
            getattr(d, "wait_for_ready", None),
            getattr(d, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        return continuation(self._details(client_call_details), request_iterator)


class _AioBase:
    def __init__(self, token: str) -> None:
        self._token = token

    def _details(self, d: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        return grpc.aio.ClientCallDetails(
            d.method,
            d.timeout,
            grpc.aio.Metadata(*_metadata(d.metadata, self._token)),
            d.credentials,
            d.wait_for_ready,
        )


class _AioUnaryUnary(_AioBase, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._details(client_call_details), request)


class _AioUnaryStream(_AioBase, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._details(client_call_details), request)


class _AioStreamUnary(_AioBase, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        return await continuation(self._details(client_call_details), request_iterator)


class _AioStreamStream(_AioBase, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        return await continuation(self._details(client_call_details), request_iterator)


def aio_interceptors(token: str) -> list[grpc.aio.ClientInterceptor]:
    return [_AioUnaryUnary(token), _AioUnaryStream(token), _AioStreamUnary(token), _AioStreamStream(token)]
