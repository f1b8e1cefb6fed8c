"""One scheduler connection for the Python client: a channel, its stub and the store's address; every
failed call becomes pedl.client's one error type, ClientError."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc

from pedl import _grpc
from pedl.client import DEFAULT_MASTER, ClientError, resolve_master
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc

_TIMEOUT = 30.0
_STREAM_TIMEOUT = 600.0


class Session:
    """One scheduler channel plus the store address, looked up once on first download."""

    def __init__(self, master: str) -> None:
        self.master = master
        self._channel = _grpc.channel(master)
        self.stub = scheduler_pb2_grpc.SchedulerServiceStub(self._channel)
        self._store_address: str | None = None

    def call(self, method: str, request: Any, what: str) -> Any:
        try:
            return getattr(self.stub, method)(request, timeout=_TIMEOUT)
        except grpc.RpcError as e:
            raise self.error(e, what) from None

    def store_address(self) -> str:
        if self._store_address is None:
            info = self.call("GetClusterInfo", scheduler_pb2.GetClusterInfoRequest(), "cluster info")
            if not info.checkpoint_store_address:
                raise ClientError(f"the scheduler at {self.master} names no checkpoint store")
            self._store_address = info.checkpoint_store_address
        return self._store_address

    def stream(self, method: str, request: Any, what: str) -> list[Any]:
        """A server stream read to its end, with `call`'s errors."""
        return list(self.iterate(method, request, what, timeout=_STREAM_TIMEOUT))

    def iterate(self, method: str, request: Any, what: str, timeout: float | None = None) -> Iterator[Any]:
        """A server stream's messages as they arrive (no deadline unless `timeout`), with `call`'s errors."""
        try:
            yield from getattr(self.stub, method)(request, timeout=timeout)
        except grpc.RpcError as e:
            raise self.error(e, what) from None

    def error(self, e: grpc.RpcError, what: str) -> ClientError:
        """The ClientError for a failed call, in a user's words."""
        code = e.code()
        details = e.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE:
            return ClientError(f"cannot reach the pedl scheduler at {self.master}: {details}")
        if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED):
            return ClientError(details or f"{what}: {code.name}")
        return ClientError(f"{what} at {self.master} failed ({code.name}): {details}")

    def close(self) -> None:
        self._channel.close()


__all__ = ["DEFAULT_MASTER", "ClientError", "Session", "resolve_master"]
