"""Checkpoint-relative file paths ('/'-separated), checked wherever they cross a trust boundary."""

from __future__ import annotations


def validate_relpath(path: str) -> str:
    """Returns `path` if it is a safe relative path, else raises ValueError saying why.

    Rejects what could escape the checkpoint's root or alias another file: absolute paths,
    '..' and '.' parts, empty parts ('a//b', trailing '/'), backslashes and NUL bytes.
    """
    if not path:
        raise ValueError("file path is empty")
    if "\x00" in path:
        raise ValueError(f"file path {path!r} contains a NUL byte")
    if "\\" in path:
        raise ValueError(f"file path {path!r} contains a backslash; use '/' as separator")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise ValueError(f"file path {path!r} is absolute; paths must be relative")
    for part in path.split("/"):
        if part == "..":
            raise ValueError(f"file path {path!r} contains '..'")
        if part in ("", "."):
            raise ValueError(f"file path {path!r} has an empty or '.' component")
    return path


def parent_dirs(path: str) -> list[str]:
    """'a/b/c' -> ['a', 'a/b']."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]
