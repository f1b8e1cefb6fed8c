"""A following gRPC server stream as an async iterator, for streaming HTTP responses.

The gRPC call is blocking; a thread of its own reads it and hands each message to the event loop,
so a waiting stream holds no worker thread of the server's pool, and the HTTP side can write
keepalives while nothing comes. Closing the iterator (the client left) cancels the call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc

from pedl_webui.gateway import GatewayError, error_of


@dataclass(frozen=True)
class Item:
    """One thing from the stream: a message, its end, a refusal, or a quiet spell (keepalive)."""

    kind: str  # "message" | "end" | "error" | "keepalive"
    value: Any = None


class Relay:
    def __init__(self, call: Any, keepalive_seconds: float) -> None:
        self._call = call
        self._keepalive = keepalive_seconds
        self._loop = asyncio.get_running_loop()
        self._items: asyncio.Queue[Item] = asyncio.Queue(maxsize=256)
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _put(self, item: Item) -> None:
        future = asyncio.run_coroutine_threadsafe(self._items.put(item), self._loop)
        try:
            future.result()  # back-pressure: a slow client slows the read, memory stays bounded
        except (RuntimeError, asyncio.CancelledError):
            self._call.cancel()

    def _pump(self) -> None:
        try:
            for message in self._call:
                self._put(Item("message", message))
            self._put(Item("end"))
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                self._put(Item("error", error_of(e)))
        except RuntimeError:  # the loop closed under us: the server is stopping
            self._call.cancel()

    async def first(self, wait_seconds: float) -> Item:
        """The first item, or a keepalive when none came in `wait_seconds`; a refusal (unknown id,
        no permission) comes at once, so the caller can answer it as a plain HTTP error."""
        try:
            return await asyncio.wait_for(self._items.get(), wait_seconds)
        except asyncio.TimeoutError:
            return Item("keepalive")

    async def items(self, first: Item | None = None) -> AsyncIterator[Item]:
        """Every item after `first` (yielded first), keepalives in quiet spells, until end or error."""
        try:
            item = first
            while True:
                if item is not None:
                    yield item
                    if item.kind in ("end", "error"):
                        return
                try:
                    item = await asyncio.wait_for(self._items.get(), self._keepalive)
                except asyncio.TimeoutError:
                    item = Item("keepalive")
        finally:
            self.cancel()

    def cancel(self) -> None:
        self._call.cancel()
        while not self._items.empty():  # unblock a pump waiting on a full queue
            self._items.get_nowait()


async def open_relay(call: Any, keepalive_seconds: float, wait_seconds: float = 2.0) -> tuple[Relay, Item]:
    """Starts relaying `call`; raises the scheduler's refusal when that is the first thing it says."""
    relay = Relay(call, keepalive_seconds)
    first = await relay.first(wait_seconds)
    if first.kind == "error":
        relay.cancel()
        error: GatewayError = first.value
        raise error
    return relay, first
