"""Which files of a context directory belong to the model definition.

`.pedlignore` and `.detignore` at the top level use full .gitignore syntax (both apply when both
exist). As in git, a file inside an ignored directory cannot be re-included by a negation.
Byte-compiled files (`*.pyc`, `__pycache__/`) are always left out.
"""

from __future__ import annotations

from pathlib import Path

import pathspec

IGNORE_FILES = (".pedlignore", ".detignore")
_ALWAYS_IGNORED = ("__pycache__/", "*.pyc")


def load_ignore_spec(root: Path) -> pathspec.PathSpec:
    lines: list[str] = list(_ALWAYS_IGNORED)
    for name in IGNORE_FILES:
        path = root / name
        if path.is_file():
            lines.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return pathspec.GitIgnoreSpec.from_lines(lines)


def is_ignored(spec: pathspec.PathSpec, rel: str, *, is_dir: bool) -> bool:
    """`rel` is POSIX-style and relative to the context root; directories are matched with a slash."""
    if rel.endswith(".pyc") or "__pycache__" in rel.split("/"):
        return True
    return spec.match_file(rel + "/" if is_dir else rel)
