"""A searcher's durable state: its last snapshot plus the events it has heard since.

Writing the whole snapshot with every event makes a large search quadratic: ASHA's snapshot
holds every configuration it has made (at 10,000 trials, 2 MB and 0.2 s to build, per
transaction). Searchers are deterministic state machines (their random generator is part of
the snapshot), so a snapshot and the events after it, replayed in order, give back exactly the
state the searcher had. Each event is journaled in the transaction that acts on it; a snapshot
is written instead while snapshots are small, or once enough events have piled up, and the
events it covers are then dropped. Pure bookkeeping: the manager turns `flush()` into SQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pedl.searcher import Operation, SearchMethod

# Below this size a snapshot is written with every event, as cheap as the events themselves.
SMALL_SNAPSHOT_BYTES = 64 * 1024
# Above it, a snapshot at most every this many events (a restart replays no more than these).
EVENTS_PER_SNAPSHOT = 1000

EVENTS = frozenset(
    {
        "initial_operations",
        "on_trial_created",
        "on_validation_completed",
        "on_trial_closed",
        "on_trial_exited_early",
        "on_trial_revived",
    }
)


@dataclass
class Flush:
    """What to write now: a snapshot covering events up to `seq` (dropping journaled events up to
    it when `drop_events`), or else the new events as (seq, event json)."""

    seq: int
    snapshot: str | None = None
    drop_events: bool = False
    events: list[tuple[int, str]] = field(default_factory=list)


class SearcherJournal:
    def __init__(self, searcher: SearchMethod, seq: int = 0, snapshot_bytes: int = 0) -> None:
        self.searcher = searcher
        self.seq = seq  # events heard so far
        self.snapshot_seq = seq  # events the stored snapshot covers
        self.snapshot_bytes = snapshot_bytes
        self._journaled = False  # events are stored beyond the snapshot
        self._unsaved: list[tuple[int, str]] = []

    def call(self, event: str, *args: Any) -> list[Operation]:
        """Hands the searcher an event (a method of SearchMethod's event API) and remembers it."""
        if event not in EVENTS:
            raise ValueError(f"{event!r} is not a searcher event")
        ops = getattr(self.searcher, event)(*args)
        self.seq += 1
        self._unsaved.append((self.seq, json.dumps([event, *args])))
        return ops

    def flush(self) -> Flush | None:
        """What to write for the events heard since the last flush (None: nothing new)."""
        if not self._unsaved:
            return None
        unsaved, self._unsaved = self._unsaved, []
        if self.snapshot_bytes <= SMALL_SNAPSHOT_BYTES or self.seq - self.snapshot_seq >= EVENTS_PER_SNAPSHOT:
            snapshot = json.dumps(self.searcher.snapshot())
            out = Flush(self.seq, snapshot=snapshot, drop_events=self._journaled)
            self.snapshot_seq, self.snapshot_bytes, self._journaled = self.seq, len(snapshot), False
            return out
        self._journaled = True
        return Flush(self.seq, events=unsaved)

    def replay(self, events: Iterable[tuple[int, str]]) -> None:
        """Applies journaled events after the snapshot the searcher was restored from, in order."""
        for seq, text in events:
            event, *args = json.loads(text)
            if event not in EVENTS:
                raise ValueError(f"searcher journal event {seq} is {event!r}, not a searcher event")
            getattr(self.searcher, event)(*args)
            self.seq = seq
            self._journaled = True
