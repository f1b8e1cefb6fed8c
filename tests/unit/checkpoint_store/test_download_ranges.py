"""Ranged downloads: the store answers one file's byte range, refuses ranges outside it in one line,
and the client writes parallel parts in place and checks each whole file."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_checkpoint_store_logic import FILES, chunk, new_store, upload

from pedl.checkpoints import CheckpointError
from pedl.checkpoints.url_fetch import RangeReader, ShortObject, Target, UrlFetcher
from pedl.v1.checkpoint_store_pb2 import FileChunk
from pedl_checkpoint_store.errors import DataLoss, InvalidArgument, NotFound
from pedl_checkpoint_store.store import CheckpointStore


def read_range(
    store: CheckpointStore, uuid: str, path: str, offset: int, length: int, chunk_size: int = 3
) -> list[FileChunk]:
    return [chunk(item) for item in store.open_range(uuid, path, offset, length, chunk_size)]


def test_a_range_is_its_bytes_alone_in_chunks_with_file_offsets(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES)
    chunks = read_range(store, cp.uuid, "model/weights.pt", 5, 7)
    assert b"".join(c.data for c in chunks) == FILES["model/weights.pt"][5:12]
    assert [c.offset for c in chunks] == [5, 8, 11]
    assert [c.last for c in chunks] == [False, False, True]
    assert {c.path for c in chunks} == {"model/weights.pt"} and not any(c.sha256 for c in chunks)
    # length 0: to the end of the file; an empty file is one empty last chunk.
    assert b"".join(c.data for c in read_range(store, cp.uuid, "model/weights.pt", 10, 0)) == b"abcdef"
    assert [(c.data, c.last) for c in read_range(store, cp.uuid, "empty", 0, 0)] == [(b"", True)]


@pytest.mark.parametrize(
    ("path", "offset", "length", "message"),
    [
        ("nope", 0, 1, r"range of checkpoint \S+: it has no file 'nope'$"),
        (
            "opt/state",
            0,
            4,
            r"range of file 'opt/state' of checkpoint \S+: offset 0, length 4 is outside its 3 bytes$",
        ),
        ("opt/state", 4, 0, r"offset 4, length -1 is outside its 3 bytes$"),
        ("opt/state", -1, 2, r"offset -1, length 2 is outside its 3 bytes$"),
        ("opt/state", 1, -1, r"offset 1, length -1 is outside its 3 bytes$"),
    ],
)
def test_a_range_outside_the_file_is_refused_in_one_line(
    tmp_path: Path, path: str, offset: int, length: int, message: str
) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES)
    with pytest.raises(InvalidArgument, match=message) as info:
        store.open_range(cp.uuid, path, offset, length)
    assert "\n" not in str(info.value)


def test_ranges_of_unknown_deleted_and_truncated_files(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    with pytest.raises(NotFound):
        store.open_range("no-such-uuid", "empty", 0, 0)
    cp = upload(store, FILES)
    stored = tmp_path / cp.uuid / "data" / "model" / "weights.pt"
    stored.write_bytes(b"0123")
    with pytest.raises(
        DataLoss, match="'model/weights.pt' of checkpoint .* the record says 16 bytes, storage"
    ):
        read_range(store, cp.uuid, "model/weights.pt", 0, 16)
    stored.unlink()
    with pytest.raises(DataLoss, match="'model/weights.pt' of checkpoint .* is missing"):
        read_range(store, cp.uuid, "model/weights.pt", 0, 16)


def pieces_of(data: bytes, piece: int) -> RangeReader:
    def read(target: Target, start: int, length: int) -> Iterator[bytes]:
        part = data[start : start + length]
        for i in range(0, len(part), piece):
            yield part[i : i + piece]

    return read


def test_parts_read_by_any_reader_are_written_in_place_and_hashed_in_order(tmp_path: Path) -> None:
    data = bytes(range(256)) * 41 + b"tail"
    fetcher = UrlFetcher(part_size=1000, concurrency=3)
    try:
        target = Target("f", "", tmp_path / "f", len(data))
        (fetched,) = fetcher.fetch([target], pieces_of(data, 300))
        assert (tmp_path / "f").read_bytes() == data
        assert (fetched.size, fetched.sha256) == (len(data), hashlib.sha256(data).hexdigest())
        with pytest.raises(ShortObject, match="answered 499 bytes for bytes 10000-10499"):
            list(fetcher.fetch([target], pieces_of(data[:-1], 300)))

        def one_too_many(target: Target, start: int, length: int) -> Iterator[bytes]:
            yield data[start : start + length + 1]

        with pytest.raises(CheckpointError, match=r"1001 bytes at 0 of 'f' overrun bytes 0-999"):
            list(fetcher.fetch([target], one_too_many))
    finally:
        fetcher.close()


def test_parts_with_the_records_hashes_are_checked_each_alone(tmp_path: Path) -> None:
    """A record with each part's sha256 (a direct upload's): parts follow its part size, each is
    checked by the thread that fetched it, and one changed byte is refused naming its part."""
    data = bytes(range(256)) * 41 + b"tail"
    hashes = tuple(hashlib.sha256(data[i : i + 4000]).hexdigest() for i in range(0, len(data), 4000))
    fetcher = UrlFetcher(part_size=1000, concurrency=3)
    asked: list[int] = []

    def counted(target: Target, start: int, length: int) -> Iterator[bytes]:
        asked.append(start)
        return pieces_of(spoilt, 300)(target, start, length)

    try:
        target = Target("f", "", tmp_path / "f", len(data), part_size=4000, part_sha256=hashes)
        spoilt = data
        (fetched,) = fetcher.fetch([target], counted)
        assert (tmp_path / "f").read_bytes() == data
        assert (fetched.size, fetched.sha256) == (len(data), None)  # checked by parts, not whole
        assert sorted(asked) == [0, 4000, 8000]
        spoilt = data[:5000] + b"?" + data[5001:]
        with pytest.raises(ShortObject, match=r"bytes 4000-7999 have sha256 [0-9a-f]{64}, not " + hashes[1]):
            list(fetcher.fetch([target], counted))
        # Hashes that do not cover the file (or parts too big to hold): the file is hashed whole.
        for partial in (Target("f", "", tmp_path / "f", len(data), 4000, hashes[:2]),
                        Target("f", "", tmp_path / "f", len(data), 2**40, hashes[:1])):  # fmt: skip
            (fetched,) = fetcher.fetch([partial], pieces_of(data, 300))
            assert fetched.sha256 == hashlib.sha256(data).hexdigest()
    finally:
        fetcher.close()
