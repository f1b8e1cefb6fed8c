"""The grpc.aio forms of `bearer.BearerInterceptor`, for the services' and the SDK's async channels;
apart so that importing the blocking one loads neither grpc.aio nor asyncio (the CLI's start)."""

from __future__ import annotations

from typing import Any

import grpc.aio

from pedl.auth.bearer import metadata_with_token


class _AioBase:
    def __init__(self, token: str) -> None:
        self._token = token

    def _details(self, d: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        return grpc.aio.ClientCallDetails(
            d.method,
            d.timeout,
            grpc.aio.Metadata(*metadata_with_token(d.metadata, self._token)),
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
