"""A searcher's journal: the events it has heard since its last snapshot (`searcher_journal.py`)."""

from __future__ import annotations

from sqlalchemy import bindparam, delete, insert, select

from pedl_scheduler.storage.connection import Positional, Storage
from pedl_scheduler.storage.tables import searcher_events

_EVENTS_AFTER = (
    select(searcher_events.c.seq, searcher_events.c.event_json)
    .where(searcher_events.c.experiment_id == bindparam("exp_id"), searcher_events.c.seq > bindparam("after"))
    .order_by(searcher_events.c.seq)
)
_JOURNAL = Positional(insert(searcher_events), ("experiment_id", "seq", "event_json"))  # see `Positional`
_DROP_THROUGH = delete(searcher_events).where(
    searcher_events.c.experiment_id == bindparam("exp_id"), searcher_events.c.seq <= bindparam("through")
)


def events_after(s: Storage, exp_id: int, after_seq: int) -> list[tuple[int, str]]:
    """(seq, event json) of the events journaled after `after_seq`, in order."""
    return [
        (r["seq"], r["event_json"]) for r in s.rows(_EVENTS_AFTER, {"exp_id": exp_id, "after": after_seq})
    ]


def journal_event(s: Storage, exp_id: int, seq: int, event_json: str) -> None:
    s.defer(_JOURNAL, (exp_id, seq, event_json))


def drop_events_through(s: Storage, exp_id: int, seq: int) -> None:
    """Events a new snapshot covers."""
    s.defer(_DROP_THROUGH, {"exp_id": exp_id, "through": seq})
