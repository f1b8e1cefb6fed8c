"""Client interceptors that add `authorization: Bearer <token>` to every call of a channel.

Interceptors rather than call credentials: gRPC only attaches call credentials on TLS channels,
and a development cluster may run plaintext. A call that already carries `authorization`
(a test presenting a deliberately wrong token) keeps its own. The grpc.aio ones are in
`bearer_aio`, so a blocking client (the CLI) never imports grpc.aio or asyncio for them.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import grpc

HEADER = "authorization"


def metadata_with_token(existing: Any, token: str) -> list[tuple[str, str]]:
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
            metadata_with_token(d.metadata, self._token),
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
