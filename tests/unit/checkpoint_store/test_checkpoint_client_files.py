"""The client's side of the byte streams: chunking a directory, and checking what comes back."""

import hashlib
from pathlib import Path

import pytest

from pedl.checkpoints import CheckpointError
from pedl.checkpoints.files import DirectoryWriter, file_chunks, walk_files
from pedl.v1 import checkpoint_store_pb2, common_pb2


def test_walk_files_is_recursive_and_sorted(tmp_path: Path) -> None:
    (tmp_path / "b" / "c").mkdir(parents=True)
    (tmp_path / "b" / "c" / "deep").write_bytes(b"1")
    (tmp_path / "a").write_bytes(b"")
    (tmp_path / "emptydir").mkdir()
    assert [rel for rel, _ in walk_files(tmp_path)] == ["a", "b/c/deep"]


def test_walk_files_on_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        walk_files(tmp_path / "nope")


def test_file_chunks_cover_the_file_and_hash_it(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    (tmp_path / "f").write_bytes(data)
    out = list(file_chunks("f", tmp_path / "f", chunk_size=1000))
    assert b"".join(c.data for c in out) == data
    assert [c.offset for c in out] == list(range(0, len(data), 1000))
    assert [c.last for c in out] == [False] * (len(out) - 1) + [True]
    assert out[-1].sha256 == hashlib.sha256(data).hexdigest()
    assert all(not c.sha256 for c in out[:-1])


def test_empty_file_is_one_last_chunk(tmp_path: Path) -> None:
    (tmp_path / "e").write_bytes(b"")
    [only] = file_chunks("e", tmp_path / "e")
    assert (only.data, only.last, only.sha256) == (b"", True, hashlib.sha256(b"").hexdigest())


def record(files: dict[str, bytes]) -> common_pb2.Checkpoint:
    cp = common_pb2.Checkpoint(uuid="u-1")
    for path, data in files.items():
        cp.files.add(path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    return cp


def chunk(path: str, data: bytes, offset: int = 0, last: bool = True) -> checkpoint_store_pb2.FileChunk:
    return checkpoint_store_pb2.FileChunk(path=path, offset=offset, data=data, last=last)


def test_directory_writer_writes_verified_files(tmp_path: Path) -> None:
    w = DirectoryWriter(tmp_path, record({"a/b": b"hello", "c": b""}))
    w.write(chunk("a/b", b"hel", last=False))
    w.write(chunk("a/b", b"lo", offset=3))
    w.write(chunk("c", b""))
    w.finish()
    assert (tmp_path / "a" / "b").read_bytes() == b"hello"
    assert (tmp_path / "c").read_bytes() == b""


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        ([chunk("a", b"hellO")], "file 'a' of checkpoint u-1 is corrupt: the record says 5 bytes with"),
        ([chunk("a", b"hell")], "file 'a' of checkpoint u-1 is corrupt: .* received 4 bytes"),
        ([chunk("zz", b"x")], "file 'zz', which the checkpoint does not list"),
        ([chunk("../a", b"x")], "contains '..'"),
        ([chunk("a", b"he", offset=1)], "offset 1, expected 0"),
    ],
)
def test_directory_writer_rejects_bad_streams(tmp_path: Path, stream: list, message: str) -> None:
    w = DirectoryWriter(tmp_path, record({"a": b"hello"}))
    with pytest.raises(CheckpointError, match=message):
        for c in stream:
            w.write(c)
    w.close()


def test_directory_writer_notices_missing_files(tmp_path: Path) -> None:
    w = DirectoryWriter(tmp_path, record({"a": b"1", "b": b"2"}))
    w.write(chunk("a", b"1"))
    with pytest.raises(CheckpointError, match="without file\\(s\\) 'b'"):
        w.finish()
