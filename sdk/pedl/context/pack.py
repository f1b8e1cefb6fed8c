"""Pack a model definition (a directory, or one `.py` file) into a deterministic tar.gz.

Entries are relative to the context directory, sorted, with fixed mtimes and owners, so the same
files always give the same bytes. The size limit applies to the files' total (uncompressed) size.
Symbolic links that resolve inside the directory are kept as links; links that point outside it
(or at nothing outside it) are left out and listed in `PackedContext.skipped`, as are sockets,
FIFOs and device files.
"""

from __future__ import annotations

import gzip
import io
import keyword
import os
import re
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from pedl.context.errors import ContextError
from pedl.context.ignore import is_ignored, load_ignore_spec

DEFAULT_MAX_BYTES = 96 * 1024 * 1024
_FIXED_MTIME = 0


@dataclass(frozen=True)
class PackedContext:
    data: bytes
    name: str
    files: list[tuple[str, int]]
    skipped: list[str] = field(default_factory=list)


@dataclass
class _Entry:
    rel: str
    kind: str  # "dir", "file" or "link"
    mode: int
    size: int = 0
    link: str = ""


def model_definition_name(path: str | os.PathLike[str]) -> str:
    """The directory's base name (a `.py` file's stem) made into a valid Python identifier."""
    p = Path(path).resolve()
    base = p.stem if p.is_file() else p.name
    name = re.sub(r"\W", "_", base)
    if not name or name == "_" * len(name):
        name = "model_def"
    if name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name):
        name += "_"
    return name


def pack(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> PackedContext:
    root = Path(path)
    if not root.exists():
        raise ContextError(f"model definition path does not exist: {root}")
    skipped: list[str] = []
    if root.is_file():
        if root.suffix != ".py":
            raise ContextError(f"model definition must be a directory or a .py file: {root}")
        entries = [_Entry(rel=root.name, kind="file", mode=root.stat().st_mode, size=root.stat().st_size)]
        base = root.parent
    elif root.is_dir():
        entries = _walk(root, skipped)
        base = root
    else:
        raise ContextError(f"model definition must be a directory or a .py file: {root}")
    files = [(e.rel, e.size) for e in entries if e.kind == "file"]
    if not files:
        raise ContextError(f"model definition {root} has no files to upload (after .pedlignore/.detignore)")
    total = sum(size for _, size in files)
    if total > max_bytes:
        raise ContextError(_too_large_message(root, files, total, max_bytes))
    return PackedContext(
        data=_archive(base, entries), name=model_definition_name(root), files=files, skipped=skipped
    )


def _walk(root: Path, skipped: list[str]) -> list[_Entry]:
    spec = load_ignore_spec(root)
    real_root = os.path.realpath(root)
    entries: list[_Entry] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        kept_dirs = []
        for name in sorted(dirnames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            full = os.path.join(dirpath, name)
            if is_ignored(spec, rel, is_dir=True):
                continue
            if os.path.islink(full):
                _add_link(entries, skipped, full, rel, real_root)
                continue
            entries.append(_Entry(rel=rel, kind="dir", mode=0o755))
            kept_dirs.append(name)
        dirnames[:] = kept_dirs
        for name in sorted(filenames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            full = os.path.join(dirpath, name)
            if is_ignored(spec, rel, is_dir=False):
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                _add_link(entries, skipped, full, rel, real_root)
            elif stat.S_ISREG(st.st_mode):
                entries.append(_Entry(rel=rel, kind="file", mode=st.st_mode, size=st.st_size))
            else:
                skipped.append(rel)
    entries.sort(key=lambda e: e.rel)
    return entries


def _add_link(entries: list[_Entry], skipped: list[str], full: str, rel: str, real_root: str) -> None:
    target = os.path.realpath(full)
    if target != real_root and not target.startswith(real_root + os.sep):
        skipped.append(rel)
        return
    link = os.path.relpath(target, os.path.dirname(os.path.join(real_root, rel)))
    entries.append(_Entry(rel=rel, kind="link", mode=0o777, link=link.replace(os.sep, "/")))


def _archive(base: Path, entries: list[_Entry]) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=_FIXED_MTIME) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for entry in entries:
                info = tarfile.TarInfo(entry.rel)
                info.mtime = _FIXED_MTIME
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if entry.kind == "dir":
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                elif entry.kind == "link":
                    info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, entry.link
                    tar.addfile(info)
                else:
                    info.mode = 0o755 if entry.mode & 0o111 else 0o644
                    _add_file(tar, info, base / entry.rel)
    return buf.getvalue()


def _add_file(tar: tarfile.TarFile, info: tarfile.TarInfo, path: Path) -> None:
    try:
        with open(path, "rb") as f:
            info.size = os.fstat(f.fileno()).st_size
            tar.addfile(info, f)
    except OSError as e:
        raise ContextError(f"cannot read {path}: {e.strerror or e}") from None


def _too_large_message(root: Path, files: list[tuple[str, int]], total: int, max_bytes: int) -> str:
    """One line (the CLI prints it as the whole answer): the size, the ten largest files, the cure."""
    largest = sorted(files, key=lambda f: (-f[1], f[0]))[:10]
    listing = ", ".join(f"{rel} ({_human(size)})" for rel, size in largest)
    return (
        f"model definition {root} is {_human(total)}, over the {_human(max_bytes)} limit; largest files: "
        f"{listing}; add large files that training does not need (data sets, checkpoints, binaries) "
        "to .pedlignore"
    )


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
