"""Chunks encoded and read in protobuf's wire format without copying their data: what protobuf
itself writes and parses, so old clients and stores read them as before."""

from __future__ import annotations

import pytest

from pedl.checkpoints.chunk_wire import MalformedChunk, decode_chunk, encode_chunk, serialize_response
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import common_pb2

CASES = [
    ("model/weights.pt", 0, b"", True, "ab" * 32),
    ("ünï/cödé", 7, b"x", False, ""),
    ("big", 3 << 40, bytes(range(256)) * 700, False, ""),  # a multi-byte length and offset
]


@pytest.mark.parametrize(("path", "offset", "data", "last", "sha256"), CASES)
def test_encoded_chunks_are_what_protobuf_parses(
    path: str, offset: int, data: bytes, last: bool, sha256: str
) -> None:
    raw = encode_chunk(path, offset, data, last=last, sha256=sha256)
    parsed = pb.DownloadCheckpointResponse.FromString(raw)
    assert parsed.WhichOneof("message") == "chunk"
    assert (parsed.chunk.path, parsed.chunk.offset, parsed.chunk.data) == (path, offset, data)
    assert (parsed.chunk.last, parsed.chunk.sha256) == (last, sha256)


@pytest.mark.parametrize(("path", "offset", "data", "last", "sha256"), CASES)
def test_chunks_protobuf_serializes_decode_with_their_data_in_place(
    path: str, offset: int, data: bytes, last: bool, sha256: str
) -> None:
    message = pb.DownloadCheckpointResponse(
        chunk=pb.FileChunk(path=path, offset=offset, data=data, last=last, sha256=sha256)
    )
    raw = serialize_response(message)
    chunk = decode_chunk(raw)
    assert chunk is not None
    assert (chunk.path, chunk.offset, bytes(chunk.data), chunk.last, chunk.sha256) == (
        path, offset, data, last, sha256
    )  # fmt: skip
    assert chunk.data.obj is raw  # a view of the received bytes, not a copy


def test_the_record_or_a_url_is_not_a_chunk() -> None:
    record = pb.DownloadCheckpointResponse(checkpoint=common_pb2.Checkpoint(uuid="u"))
    url = pb.DownloadCheckpointResponse(url=pb.FileUrl(path="a", url="http://x/a"))
    assert decode_chunk(record.SerializeToString()) is None
    assert decode_chunk(url.SerializeToString()) is None
    assert serialize_response(b"as encoded") == b"as encoded"


def test_negative_offsets_and_unknown_fields_read_as_protobuf_reads_them() -> None:
    message = pb.FileChunk(path="a", offset=-1, data=b"d")
    extra = b"\x30\x05" + b"\x3d\x01\x02\x03\x04" + b"\x41" + bytes(8)  # fields 6-8: varint, fixed32, fixed64
    inner = message.SerializeToString() + extra
    raw = b"\x12" + bytes([len(inner)]) + inner
    chunk = decode_chunk(raw)
    assert chunk is not None and (chunk.offset, bytes(chunk.data)) == (-1, b"d")
    assert pb.DownloadCheckpointResponse.FromString(raw).chunk.offset == -1


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"\x12\x05abc", "field 2 of 5 bytes runs past the message's end"),
        (b"\x12\x80", "a varint runs past the message's end"),
        (b"\x12\x02\x1a\x09", "field 3 of 9 bytes runs past the message's end"),
        (b"\x13", "field 2 has wire type 3, which protobuf does not write"),
        (b"\x12\x03\x3d\x01\x02", "the last field runs past the message's end"),
    ],
)
def test_malformed_bytes_are_refused_in_one_line(raw: bytes, error: str) -> None:
    with pytest.raises(MalformedChunk, match=error):
        decode_chunk(raw)
