"""Keeps a generated section of README.md (between two marker lines) current: the scripts that
generate README tables write it, or with `--check` fail when it is stale (the suite runs that)."""

from __future__ import annotations

from pathlib import Path


def splice(text: str, begin: str, end: str, section: str) -> str:
    start, stop = text.index(begin), text.index(end) + len(end)
    return text[:start] + section + text[stop:]


def write_or_check(readme: Path, begin: str, end: str, section: str, what: str, argv: list[str]) -> int:
    """`section` includes its markers; `what` names it and the script in the stale message."""
    text = readme.read_text(encoding="utf-8")
    new = splice(text, begin, end, section)
    if "--check" in argv:
        if new != text:
            print(f"README.md's {what} is out of date")
            return 1
        return 0
    readme.write_text(new, encoding="utf-8")
    return 0
