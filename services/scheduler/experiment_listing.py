"""Filtered pages of ListExperiments. State, owner and archived filters and the order run in SQL;
the text filter runs here, over rows read a page at a time, because what it searches (description,
labels, the searcher's name) lives inside each row's JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from pedl.v1 import common_pb2, scheduler_pb2
from pedl_scheduler import convert, paging
from pedl_scheduler.storage.connection import Row, Storage
from pedl_scheduler.storage.ops import experiments as experiment_ops

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


def requested_page(db: Storage, request: scheduler_pb2.ListExperimentsRequest) -> tuple[list[Row], str]:
    """The rows (with num_trials) a ListExperimentsRequest asks for and its next_page_token; raises
    paging.PageError or ValueError naming a bad field."""
    filtered = request.newest_first or request.states or request.owner or request.exclude_archived
    if request.page_size == 0 and not request.page_token and not (filtered or request.text):
        return experiment_ops.experiments_with_trial_counts(db), ""  # a client from before paging
    limit, after = paging.page_size(request.page_size), paging.after_id(request.page_token)
    states = tuple(state_names(request.states))

    def fetch(after_id: int, n: int) -> list[Row]:
        return experiment_ops.filtered_experiments_page(
            db,
            after_id,
            n,
            newest_first=request.newest_first,
            states=states,
            owner=request.owner,
            exclude_archived=request.exclude_archived,
        )

    return page(fetch, after, limit, request.text.strip())


def state_names(states: Sequence[common_pb2.ExperimentState.ValueType]) -> list[str]:
    names = []
    for value in states:
        if value not in convert.STATE_NAMES:
            raise ValueError(f"states: {value} is not an experiment state")
        names.append(convert.STATE_NAMES[value])
    return names
