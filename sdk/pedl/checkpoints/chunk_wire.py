"""DownloadCheckpoint's chunk messages in protobuf's wire format, built and read without copying
their bytes field.

A protobuf message owns its bytes: setting `FileChunk.data` copies the bytes in, serializing copies
them out, parsing copies them in again and reading `.data` out once more. A streamed download moved
every byte through four such copies on top of gRPC's own (a third of the client's and store's CPU,
by perf). Here the store joins a few header bytes to the data once, and the client takes `data` as
a view of the received buffer. The bytes are the same a message would have: old clients and stores
parse them as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from pedl.v1 import checkpoint_store_pb2 as pb

# Field numbers of DownloadCheckpointResponse.chunk and of FileChunk's fields (checkpoint_store.proto).
_RESPONSE_RECORD, _RESPONSE_CHUNK, _RESPONSE_URL = 1, 2, 3
_PATH, _OFFSET, _DATA, _LAST, _SHA256 = 1, 2, 3, 4, 5
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class MalformedChunk(ValueError):
    """The bytes are not a DownloadCheckpointResponse."""


@dataclass(frozen=True)
class WireChunk:
    path: str
    offset: int
    data: memoryview  # a view of the received message: no copy
    last: bool
    sha256: str


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_chunk(path: str, offset: int, data: bytes, *, last: bool, sha256: str = "") -> bytes:
    """The serialized DownloadCheckpointResponse carrying this chunk; `data` is copied once, into it."""
    header = pb.FileChunk(path=path, offset=offset, last=last, sha256=sha256).SerializeToString()
    data_field = _varint(_DATA << 3 | _LEN) + _varint(len(data))
    chunk_size = len(header) + len(data_field) + len(data)
    prefix = _varint(_RESPONSE_CHUNK << 3 | _LEN) + _varint(chunk_size) + header + data_field
    return b"".join((prefix, data))


def serialize_response(item: pb.DownloadCheckpointResponse | bytes) -> bytes:
    """DownloadCheckpoint's response serializer: chunks come already encoded, the rest as messages."""
    if isinstance(item, bytes):
        return item
    return item.SerializeToString()


def _read_varint(buf: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(buf) or shift > 63:
            raise MalformedChunk("a varint runs past the message's end")
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(buf: memoryview) -> list[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of each field: varints as ints, LEN fields as views."""
    fields: list[tuple[int, int, int | memoryview]] = []
    at = 0
    while at < len(buf):
        key, at = _read_varint(buf, at)
        number, kind = key >> 3, key & 7
        value: int | memoryview
        if kind == _VARINT:
            value, at = _read_varint(buf, at)
        elif kind == _LEN:
            size, at = _read_varint(buf, at)
            if at + size > len(buf):
                raise MalformedChunk(f"field {number} of {size} bytes runs past the message's end")
            value, at = buf[at : at + size], at + size
        elif kind in (_I64, _I32):
            width = 8 if kind == _I64 else 4
            value, at = int.from_bytes(buf[at : at + width], "little"), at + width
        else:
            raise MalformedChunk(f"field {number} has wire type {kind}, which protobuf does not write")
        fields.append((number, kind, value))
    if at != len(buf):
        raise MalformedChunk("the last field runs past the message's end")
    return fields


def decode_chunk(raw: bytes) -> WireChunk | None:
    """The chunk in a serialized DownloadCheckpointResponse, its data a view of `raw`; None where the
    response carries something else (the record, a URL). Raises MalformedChunk."""
    chunk: memoryview | None = None
    for number, kind, value in _fields(memoryview(raw)):
        if number == _RESPONSE_CHUNK and kind == _LEN:
            assert isinstance(value, memoryview)
            chunk = value  # the last one wins, as protobuf parses a repeated oneof member
        elif number in (_RESPONSE_RECORD, _RESPONSE_URL):
            chunk = None  # another member of the oneof, later in the message
    if chunk is None:
        return None
    path, offset, last, sha256 = "", 0, False, ""
    data = chunk[:0]  # protobuf leaves an empty field out
    for number, kind, value in _fields(chunk):
        if kind == _LEN and isinstance(value, memoryview):
            if number == _PATH:
                path = str(value, "utf-8")
            elif number == _DATA:
                data = value
            elif number == _SHA256:
                sha256 = str(value, "utf-8")
        elif kind == _VARINT and isinstance(value, int):
            if number == _OFFSET:
                offset = value - (1 << 64) if value >= 1 << 63 else value
            elif number == _LAST:
                last = bool(value)
    return WireChunk(path, offset, data, last, sha256)
