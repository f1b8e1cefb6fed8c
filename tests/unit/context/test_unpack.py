"""Unpacking refuses every malicious archive form and never writes outside the destination."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pedl.context import ContextError, unpack
from pedl.context.unpack import check_archive


def tarball(*members: tuple[tarfile.TarInfo, bytes | None], gz: bool = True) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as tar:
        for info, content in members:
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return buf.getvalue()


def file(name: str, content: bytes = b"pwned") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(content)
    return info, content


def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def snapshot(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, Path, Callable[[], None]]:
    """(outer dir, dest inside it, check that nothing appeared in outer outside dest)."""
    outer = tmp_path / "outer"
    dest = outer / "dest"
    outer.mkdir()
    (outer / "victim.txt").write_text("original")
    before = snapshot(outer)

    def check() -> None:
        after = {p for p in snapshot(outer) if not p.startswith("dest")}
        assert after == {p for p in before if not p.startswith("dest")}
        assert (outer / "victim.txt").read_text() == "original"

    return outer, dest, check


MALICIOUS = {
    "absolute path": [file("/tmp/pedl-evil-abs")],
    "dotdot": [file("../victim.txt")],
    "nested dotdot": [file("a/../../victim.txt")],
    "symlink outside": [special("link", tarfile.SYMTYPE, "../victim.txt")],
    "absolute symlink": [special("link", tarfile.SYMTYPE, "/etc/passwd")],
    "write through symlink": [special("d", tarfile.SYMTYPE, ".."), file("d/victim.txt")],
    "symlink chain escape": [
        special("x", tarfile.DIRTYPE),
        special("x/s", tarfile.SYMTYPE, ".."),
        special("t", tarfile.SYMTYPE, "x/s/.."),
    ],
    "hardlink outside": [special("h", tarfile.LNKTYPE, "../victim.txt")],
    "hardlink absolute": [special("h", tarfile.LNKTYPE, "/etc/passwd")],
    "hardlink to unknown": [special("h", tarfile.LNKTYPE, "nothing.txt")],
    "char device": [special("dev", tarfile.CHRTYPE)],
    "block device": [special("blk", tarfile.BLKTYPE)],
    "fifo": [special("fifo", tarfile.FIFOTYPE)],
}


@pytest.mark.parametrize("form", sorted(MALICIOUS))
def test_malicious_archive_refused(form: str, sandbox: tuple[Path, Path, Callable[[], None]]) -> None:
    outer, dest, check = sandbox
    with pytest.raises(ContextError) as err:
        unpack(tarball(*MALICIOUS[form]), dest)
    assert "archive entry" in str(err.value)
    check()
    for link in dest.rglob("*"):
        assert not link.is_symlink() or (dest in link.resolve().parents or link.resolve() == dest.resolve())


def test_error_names_the_entry(sandbox: tuple[Path, Path, Callable[[], None]]) -> None:
    _, dest, _ = sandbox
    with pytest.raises(ContextError, match=r"'\.\./victim\.txt'"):
        unpack(tarball(file("ok.py", b"1"), file("../victim.txt")), dest)


def test_declared_size_over_limit_refused(sandbox: tuple[Path, Path, Callable[[], None]]) -> None:
    _, dest, check = sandbox
    with pytest.raises(ContextError, match="limit"):
        unpack(tarball(file("a.bin", b"\0" * 6000), file("b.bin", b"\0" * 6000)), dest, max_bytes=10_000)
    check()
    assert not (dest / "b.bin").exists()


def test_compression_bomb_refused(tmp_path: Path) -> None:
    bomb = tarball(file("zeros.bin", b"\0" * (4 * 1024 * 1024)))
    assert len(bomb) < 20_000
    with pytest.raises(ContextError, match="limit"):
        unpack(bomb, tmp_path / "dest", max_bytes=1024 * 1024)


def test_too_many_entries_refused(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match="more than 5 entries"):
        unpack(tarball(*(file(f"f{i}.py", b"") for i in range(6))), tmp_path / "dest", max_entries=5)


def test_corrupt_data_is_a_context_error(tmp_path: Path) -> None:
    good = tarball(file("a.py", b"x" * 1000))
    with pytest.raises(ContextError):
        unpack(good[: len(good) // 2], tmp_path / "dest")
    with pytest.raises(ContextError):
        unpack(b"definitely not a tarball", tmp_path / "dest2")


def test_safe_links_and_uncompressed_tar_accepted(tmp_path: Path) -> None:
    data = tarball(
        special("pkg", tarfile.DIRTYPE),
        file("pkg/real.py", b"real"),
        special("pkg/alias.py", tarfile.SYMTYPE, "real.py"),
        special("top.py", tarfile.SYMTYPE, "pkg/real.py"),
        special("copy.py", tarfile.LNKTYPE, "pkg/real.py"),
        file("./dotted.py", b"d"),
        gz=False,
    )
    dest = tmp_path / "dest"
    unpack(data, dest)
    assert (dest / "pkg/alias.py").read_text() == "real"
    assert (dest / "top.py").read_text() == "real"
    assert (dest / "copy.py").read_text() == "real" and not (dest / "copy.py").is_symlink()
    assert (dest / "dotted.py").read_text() == "d"


def test_hardlink_error_names_the_link_entry(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match=r"entry 'h' is a hard link to '\.\./victim\.txt'"):
        unpack(tarball(special("h", tarfile.LNKTYPE, "../victim.txt")), tmp_path / "dest")


@pytest.mark.parametrize("form", sorted(MALICIOUS))
def test_the_schedulers_check_refuses_what_unpacking_would(form: str) -> None:
    with pytest.raises(ContextError, match="archive entry"):
        check_archive(tarball(*MALICIOUS[form]))


def test_names_that_are_not_utf8_are_refused_by_check_and_unpack(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, errors="surrogateescape") as tar:
        tar.addfile(tarfile.TarInfo(b"bad\xff.py".decode("utf-8", "surrogateescape")), io.BytesIO())
    for attempt in (lambda: check_archive(buf.getvalue()), lambda: unpack(buf.getvalue(), tmp_path / "d")):
        with pytest.raises(
            ContextError, match=r"archive entry b'bad\\xff.py' has a name that is not valid UTF-8"
        ):
            attempt()


def test_the_check_accepts_an_ordinary_archive(tmp_path: Path) -> None:
    ok = tarball(
        special("pkg", tarfile.DIRTYPE),
        file("pkg/a.py", b"x = 1\n"),
        special("b.py", tarfile.SYMTYPE, "pkg/a.py"),
    )
    assert check_archive(ok) == 3
    unpack(ok, tmp_path / "d")
    assert (tmp_path / "d" / "b.py").read_text() == "x = 1\n"
