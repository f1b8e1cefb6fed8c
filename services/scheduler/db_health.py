"""The scheduler's health follows its database: NOT_SERVING while it cannot reach it, SERVING again
once it can, so a supervisor, systemd unit or compose health check sees a scheduler that cannot
work; and calls that fail for want of the database answer UNAVAILABLE (which clients retry) with
one line, not UNKNOWN with a traceback."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio
import structlog

from pedl import _grpc
from pedl_scheduler.storage import DatabaseUnavailable, Storage

log = structlog.get_logger(component="db_health")


async def watch_database(server: grpc.aio.Server, db: Storage, interval: float) -> None:
    """Pings the database every `interval` seconds (reconnecting when it is back) and reports the
    result as the server's health; a failed call elsewhere turns it NOT_SERVING at the next ping."""
    serving = True
    while True:
        await asyncio.sleep(interval)
        reachable = db.ping()
        if reachable != serving:
            serving = reachable
            await _grpc.mark_serving(server, serving)
            if serving:
                log.info("database reachable again: serving")
            else:
                log.warning("database unreachable: health NOT_SERVING", db=db.url)


def _unavailable(behavior: Callable) -> Callable:
    async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            result = behavior(request, context)
            return await result if inspect.isawaitable(result) else result
        except DatabaseUnavailable as e:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"the scheduler's database is unavailable: {e}")

    return guarded


class DatabaseErrorInterceptor(grpc.aio.ServerInterceptor):
    """Unary calls that fail with DatabaseUnavailable answer UNAVAILABLE with its one line."""

    async def intercept_service(
        self, continuation: Callable, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None or not (handler.unary_unary or handler.stream_unary):
            return handler
        codec = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(_unavailable(handler.unary_unary), **codec)
        return grpc.stream_unary_rpc_method_handler(_unavailable(handler.stream_unary), **codec)
