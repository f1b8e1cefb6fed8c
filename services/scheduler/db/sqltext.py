"""Rewriting the scheduler's `?`-style SQL for drivers that use `%s` (psycopg)."""

from __future__ import annotations

import re

_INSERT = re.compile(r'^\s*INSERT\s+INTO\s+"?(\w+)"?', re.IGNORECASE)
_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)


def qmark_to_format(sql: str) -> str:
    """`?` becomes `%s` and `%` becomes `%%`, except inside quoted literals, identifiers and comments."""
    out: list[str] = []
    quote = ""  # the quote character we are inside, if any
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if quote:
            out.append("%%" if c == "%" else c)
            if c == quote:
                quote = ""
        elif c in ("'", '"'):
            quote = c
            out.append(c)
        elif c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end].replace("%", "%%"))
            i = end
            continue
        elif c == "?":
            out.append("%s")
        elif c == "%":
            out.append("%%")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def insert_table(sql: str) -> str | None:
    """The table an INSERT writes to, or None if `sql` is not an INSERT or already says RETURNING."""
    match = _INSERT.match(sql)
    if match is None or _RETURNING.search(sql):
        return None
    return match.group(1).lower()
