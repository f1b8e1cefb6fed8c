"""A client-streamed upload: one header that opens it, then its file chunks (checkpoints and
TensorBoard files alike)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from pedl.v1 import checkpoint_store_pb2 as pb
from pedl_checkpoint_store.errors import InvalidArgument


class _TakesChunks(Protocol):
    def add_chunk(self, chunk: pb.FileChunk) -> None: ...


U = TypeVar("U", bound=_TakesChunks)


class StreamedUpload(Generic[U]):
    """Feeds a stream's chunks to the upload its header opened; `upload` stays readable when feeding
    fails half-way, so the caller can abort what was begun."""

    def __init__(self) -> None:
        self.upload: U | None = None

    async def feed(self, requests: AsyncIterator[Any], begin: Callable[[Any], Awaitable[U]]) -> U:
        async for request in requests:
            kind = request.WhichOneof("message")
            if kind == "header":
                if self.upload is not None:
                    raise InvalidArgument("upload stream carries a second header")
                self.upload = await begin(request.header)
            elif kind == "chunk":
                if self.upload is None:
                    raise InvalidArgument("upload stream must start with a header")
                await asyncio.to_thread(self.upload.add_chunk, request.chunk)
            else:
                raise InvalidArgument("upload message has neither header nor chunk")
        if self.upload is None:
            raise InvalidArgument("upload stream ended without a header")
        return self.upload
