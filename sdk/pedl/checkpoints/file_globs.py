"""Which of a checkpoint's files a glob names (Determined's `CheckpointsRemoveFiles`, `det checkpoint rm
--glob`): pure, so the store, the scheduler (checking a user's globs first) and the tests read a glob alike.

A glob is matched against each file's whole path, '/'-separated and relative to the checkpoint: `*` and
`?` stay within one segment, `**` spans any number of them, `[...]` is a set of characters (`[!...]`
its complement). A glob naming a folder (`state`, `logs/*`) names everything in it, as removing a
directory from Determined's storage does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pedl.v1 import common_pb2


def check_glob(glob: str) -> None:
    """ValueError naming what is wrong with a glob that could name nothing inside a checkpoint; ""
    is allowed and names nothing (Determined's "refresh only")."""
    if glob and not glob.strip():
        raise ValueError("a glob must not be only spaces")
    if glob.startswith("/"):
        raise ValueError(f"glob {glob[:200]!r} must be relative to the checkpoint, not start with '/'")
    if ".." in glob.split("/"):
        raise ValueError(f"glob {glob[:200]!r} must not leave the checkpoint ('..')")
    if "\x00" in glob:
        raise ValueError("a glob must not contain a NUL character")


def _segment_class(glob: str, start: int) -> tuple[str, int]:
    """The regex for a `[...]` set starting at `start`, and the index after it; a `[` without its `]`
    is a literal bracket."""
    end = glob.find("]", start + 2 if glob[start + 1 : start + 2] in ("!", "]") else start + 1)
    if end < 0:
        return re.escape("["), start + 1
    body = glob[start + 1 : end]
    negate = body.startswith("!")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\").replace("^", "\\^")
    return ("[^/" if negate else "[") + body + "]", end + 1


def glob_regex(glob: str) -> re.Pattern[str]:
    """The compiled pattern for a (checked) glob: the whole path, or any path under it."""
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            piece, i = _segment_class(glob, i)
            out.append(piece)
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out).rstrip("/") + "(?:/.*)?", re.DOTALL)


def matching(paths: Iterable[str], globs: Iterable[str]) -> list[str]:
    """The paths any glob names, in the order given; ValueError for a bad glob."""
    patterns = []
    for glob in globs:
        check_glob(glob)
        if glob:
            patterns.append(glob_regex(glob))
    return [p for p in paths if any(pattern.fullmatch(p) for pattern in patterns)]


def without(
    checkpoint: common_pb2.Checkpoint, globs: Iterable[str]
) -> tuple[common_pb2.Checkpoint, list[str]]:
    """A copy of the record without the files any glob names (its size updated), and their paths."""
    removed = matching([f.path for f in checkpoint.files], globs)
    kept = common_pb2.Checkpoint()
    kept.CopyFrom(checkpoint)
    if removed:
        gone = set(removed)
        del kept.files[:]
        kept.files.extend(f for f in checkpoint.files if f.path not in gone)
        kept.total_size = sum(f.size for f in kept.files)
    return kept, removed
