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


_VALUES = re.compile(r"\bVALUES\s*\(", re.IGNORECASE)
# PostgreSQL takes at most 65535 parameters in one statement.
MAX_PARAMETERS = 65535


def multi_row_insert(sql: str) -> tuple[str, str, str] | None:
    """(head, row, tail) of an `INSERT ... VALUES (row) tail` with one flat row of values, so that
    `head + ", ".join([row] * n) + tail` inserts n rows in one statement; None for anything else."""
    if insert_table(sql) is None:
        return None
    match = _VALUES.search(sql)
    if match is None:
        return None
    start = match.end() - 1
    end = sql.find(")", start)
    if end < 0:
        return None
    head, row, tail = sql[:start], sql[start : end + 1], sql[end + 1 :]
    if "(" in row[1:] or _VALUES.search(tail) or any(c in head + tail for c in "?'\"%"):
        return None
    if '"' in row or any("?" in quoted for quoted in row.split("'")[1::2]):
        return None
    return head, row, tail


def numbered_rows(head: str, row: str, tail: str, n: int) -> str:
    """The multi-row statement for n rows, with PostgreSQL's own `$1, $2, ...` placeholders (a raw
    cursor sends it as is: no client-side parsing of a long statement per batch)."""
    parts = row.split("?")
    out, k = [], 0
    for _ in range(n):
        numbered = [parts[0]]
        for part in parts[1:]:
            k += 1
            numbered.append(f"${k}{part}")
        out.append("".join(numbered))
    return head + ", ".join(out) + tail
