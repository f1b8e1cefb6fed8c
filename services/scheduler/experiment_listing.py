"""Filtered pages of ListExperiments. State, owner and archived filters and the order run in SQL;
the text filter runs here, over rows read a page at a time, because what it searches (description,
labels, the searcher's name) lives inside each row's JSON."""

from __future__ import annotations

import json
from collections.abc import Callable

from pedl_scheduler import convert, paging
from pedl_scheduler.storage.connection import Row

# Most rows one call reads for a text filter: past that it answers with what it found and a token
# to go on from (a page may hold fewer than page_size and still have a next, as the API says).
SCAN_ROWS = 5000


def matches_text(row: Row, text: str) -> bool:
    """Whether the id, description, owner, searcher name or a label contains `text` (any case)."""
    needle = text.lower()
    config = json.loads(row["config_json"])
    searcher = config.get("searcher") if isinstance(config.get("searcher"), dict) else {}
    fields = [
        str(row["id"]),
        convert.description(row, config),
        row.get("owner") or "",
        str(searcher.get("name") or ""),
        *json.loads(row.get("labels_json") or "[]"),
    ]
    return any(needle in str(field).lower() for field in fields)


def page(
    fetch: Callable[[int, int], list[Row]],
    after_id: int,
    limit: int,
    text: str = "",
    scan_rows: int = SCAN_ROWS,
) -> tuple[list[Row], str]:
    """One page of rows and its next_page_token. `fetch(after_id, n)` reads the next `n` rows past
    `after_id` in the listing's order (SQL filters applied); the token is the last id looked at."""
    if not text:
        rows = fetch(after_id, limit)
        return rows, paging.next_token([r["id"] for r in rows], limit)
    found: list[Row] = []
    scanned, cursor = 0, after_id
    while True:
        batch = fetch(cursor, limit)
        for row in batch:
            cursor = row["id"]
            if matches_text(row, text):
                found.append(row)
                if len(found) == limit:
                    return found, str(cursor)
        scanned += len(batch)
        if len(batch) < limit:
            return found, ""
        if scanned >= scan_rows:
            return found, str(cursor)
