"""Unpack a model-definition archive without ever writing outside the destination.

Checked explicitly (not relying on tarfile's extraction filters, absent on Python 3.10):
- names: no absolute paths, no `..`, no writing through a symlink or over a non-directory;
- types: only files, directories, symlinks and hard links; devices and FIFOs are refused;
- links: hard links must name a file extracted earlier (it is copied); symlinks are created last,
  and after all exist each must resolve inside the destination, or all are removed again;
- names that are not valid UTF-8 are refused (they could not be shown or stored as text);
- bombs: entry count and declared sizes are checked before reading, and the decompressed stream
  itself is capped, so a huge header cannot exhaust memory.
On error the destination may hold part of the archive; nothing outside it is touched.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
from pathlib import Path, PurePosixPath
from typing import IO

from pedl.context.errors import ContextError

DEFAULT_MAX_BYTES = 1024**3
DEFAULT_MAX_ENTRIES = 100_000
_CHUNK = 1024 * 1024
# Tar headers (and pax/GNU long-name records) take space beyond file contents: allow this much per
# entry, plus slack, before the decompressed stream is cut off.
_HEADER_ALLOWANCE = 2048
_STREAM_SLACK = 16 * 1024 * 1024


class _CappedReader(io.RawIOBase):
    """Reads the decompressed stream and refuses to produce more than `limit` bytes."""

    def __init__(self, inner: io.BufferedIOBase, limit: int) -> None:
        self._inner = inner
        self._left = limit

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        want = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        chunk = self._inner.read(want)
        self._left -= len(chunk)
        if self._left < 0:
            raise ContextError("archive expands beyond the size limit (possible archive bomb)")
        return chunk


def unpack(
    data: bytes, dest: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, max_entries: int = DEFAULT_MAX_ENTRIES
) -> None:
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    root = os.path.realpath(dest)
    raw: io.BufferedIOBase = io.BytesIO(data)
    if data[:2] == b"\x1f\x8b":
        raw = gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb")
    stream = _CappedReader(raw, max_bytes + max_entries * _HEADER_ALLOWANCE + _STREAM_SLACK)
    extractor = _Extractor(root, max_bytes, max_entries)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                extractor.add(tar, member)
    except tarfile.TarError as e:
        raise ContextError(f"not a valid model definition archive: {e}") from None
    except (EOFError, OSError, gzip.BadGzipFile) as e:
        raise ContextError(f"model definition archive is corrupt or truncated: {e}") from None
    extractor.create_symlinks()


def check_archive(
    data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES, max_entries: int = DEFAULT_MAX_ENTRIES
) -> int:
    """The checks `unpack` makes, without writing anything (the scheduler runs them at create, so a
    hostile archive is refused there with the same message instead of failing on an agent).
    Symlinks are checked by their text alone (one through another symlink is refused).
    Returns the number of entries; raises ContextError."""
    raw: io.BufferedIOBase = io.BytesIO(data)
    if data[:2] == b"\x1f\x8b":
        raw = gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb")
    stream = _CappedReader(raw, max_bytes + max_entries * _HEADER_ALLOWANCE + _STREAM_SLACK)
    checker = _Extractor("/", max_bytes, max_entries)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                checker.check(member)
        checker.check_symlinks()
    except tarfile.TarError as e:
        raise ContextError(f"not a valid model definition archive: {e}") from None
    except (EOFError, OSError, gzip.BadGzipFile) as e:
        raise ContextError(f"model definition archive is corrupt or truncated: {e}") from None
    return checker.entries


class _Extractor:
    def __init__(self, root: str, max_bytes: int, max_entries: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.entries = 0
        self.total = 0
        self.files: set[str] = set()
        self.symlinks: list[tuple[str, str]] = []
        self.sizes: dict[str, int] = {}  # by file, for `check`
        self.link_names: set[str] = set()  # symlinks, for `check`

    def add(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise ContextError(f"archive has more than {self.max_entries} entries")
        rel = _safe_name(member.name)
        if rel is None:
            return  # the archive root itself ("." or "./")
        if member.isdir():
            self._make_dirs(rel, member.name)
        elif member.issym():
            self.symlinks.append((rel, member.linkname))
        elif member.islnk():
            self._hardlink(rel, member)
        elif member.isreg() and not member.issparse():
            self._charge(member.size, member.name)
            source = tar.extractfile(member)
            assert source is not None
            self._write(rel, source, member.mode, member.name)
        else:
            raise ContextError(f"archive entry {member.name!r} is a device, FIFO or other special file")

    def check(self, member: tarfile.TarInfo) -> None:
        """`add` without writing: names, types, sizes, link targets."""
        self.entries += 1
        if self.entries > self.max_entries:
            raise ContextError(f"archive has more than {self.max_entries} entries")
        rel = _safe_name(member.name)
        if rel is None:
            return
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in self.link_names:
                raise ContextError(
                    f"archive entry {member.name!r} would be written through {parts[i - 1]!r}, "
                    "not a directory"
                )
        if member.isdir():
            return
        if member.issym():
            self.link_names.add(rel)
            self.symlinks.append((rel, member.linkname))
        elif member.islnk():
            try:
                source_rel = _safe_name(member.linkname)
            except ContextError:
                source_rel = None
            if source_rel is None or source_rel not in self.files:
                raise ContextError(
                    f"archive entry {member.name!r} is a hard link to {member.linkname!r}, "
                    "which is not a file earlier in the archive"
                )
            self._charge(self.sizes[source_rel], member.name)
            self.files.add(rel)
            self.sizes[rel] = self.sizes[source_rel]
        elif member.isreg() and not member.issparse():
            self._charge(member.size, member.name)
            self.files.add(rel)
            self.sizes[rel] = member.size
        else:
            raise ContextError(f"archive entry {member.name!r} is a device, FIFO or other special file")

    def check_symlinks(self) -> None:
        """Each symlink's target, by its text: inside the archive and not through another symlink
        (whose own target could lead anywhere; refusing is simpler than resolving chains)."""
        for rel, linkname in self.symlinks:
            if not linkname or linkname.startswith("/") or "\x00" in linkname:
                raise ContextError(f"archive entry {rel!r} is a symlink to {linkname!r}, outside the archive")
            current = rel.split("/")[:-1]
            for part in PurePosixPath(linkname).parts:
                if part == "..":
                    if not current:
                        raise ContextError(
                            f"archive entry {rel!r} is a symlink to {linkname!r}, outside the archive"
                        )
                    current.pop()
                elif part != ".":
                    current.append(part)
                    if "/".join(current) in self.link_names:
                        raise ContextError(
                            f"archive entry {rel!r} is a symlink to {linkname!r}, through another symlink"
                        )

    def _charge(self, size: int, name: str) -> None:
        self.total += size
        if size < 0 or self.total > self.max_bytes:
            raise ContextError(
                f"archive entry {name!r} takes the contents over the {self.max_bytes}-byte limit"
            )

    def _path(self, rel: str, name: str) -> str:
        """The destination path for `rel`, refusing any parent that is not a real directory inside root."""
        current = self.root
        for part in rel.split("/")[:-1]:
            current = os.path.join(current, part)
            if os.path.islink(current) or (os.path.exists(current) and not os.path.isdir(current)):
                raise ContextError(
                    f"archive entry {name!r} would be written through {part!r}, not a directory"
                )
        return os.path.join(self.root, *rel.split("/"))

    def _make_dirs(self, rel: str, name: str) -> None:
        target = self._path(rel + "/x", name)
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)

    def _write(self, rel: str, source: IO[bytes], mode: int, name: str) -> None:
        target = self._path(rel, name)
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if os.path.islink(target) or os.path.isdir(target):
            raise ContextError(f"archive entry {name!r} would replace a directory or link")
        perm = 0o755 if mode & 0o111 else 0o644
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), perm)
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(source, out, _CHUNK)
        os.chmod(target, perm)
        self.files.add(rel)

    def _hardlink(self, rel: str, member: tarfile.TarInfo) -> None:
        try:
            source_rel = _safe_name(member.linkname)
        except ContextError:
            source_rel = None
        if source_rel is None or source_rel not in self.files:
            raise ContextError(
                f"archive entry {member.name!r} is a hard link to {member.linkname!r}, "
                "which is not a file earlier in the archive"
            )
        source_path = self._path(source_rel, member.name)
        self._charge(os.path.getsize(source_path), member.name)
        with open(source_path, "rb") as source:
            self._write(rel, source, os.stat(source_path).st_mode, member.name)

    def create_symlinks(self) -> None:
        created: list[str] = []
        try:
            for rel, linkname in self.symlinks:
                if not linkname or linkname.startswith("/") or "\x00" in linkname:
                    raise ContextError(
                        f"archive entry {rel!r} is a symlink to {linkname!r}, outside the archive"
                    )
                target = self._path(rel, rel)
                os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
                if os.path.lexists(target):
                    raise ContextError(f"archive entry {rel!r} is a symlink over an existing path")
                os.symlink(linkname, target)
                created.append(target)
            for target in created:
                resolved = os.path.realpath(target)
                if resolved != self.root and not resolved.startswith(self.root + os.sep):
                    rel = os.path.relpath(target, self.root)
                    raise ContextError(
                        f"archive entry {rel!r} is a symlink that points outside the destination"
                    )
        except BaseException:
            for target in created:
                os.unlink(target)
            raise


def _safe_name(name: str) -> str | None:
    """`name` as a clean relative POSIX path, None for the archive root; refuses escapes and names
    that are not valid UTF-8 (tarfile hands their bytes over as surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        shown = name.encode("utf-8", "surrogateescape")
        raise ContextError(f"archive entry {shown!r} has a name that is not valid UTF-8") from None
    if (
        "\x00" in name
        or name.startswith("/")
        or name.startswith("\\")
        or (name[1:2] == ":" and name[:1].isalpha())
    ):
        raise ContextError(f"archive entry {name!r} has an absolute path")
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if ".." in parts:
        raise ContextError(f"archive entry {name!r} has a '..' component")
    return "/".join(parts) if parts else None
