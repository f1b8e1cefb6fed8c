"""Each trial's curve as `GetMetrics` with `max_points` last cut it, kept until its rows change.

Cutting a 1,000-trial experiment's curves means reading and parsing all of its 100,000 rows (about
2 s of the scheduler's time) though the page gets a tenth of them. Rows are only ever added, once
per batch count, so a trial's (row count, last batch count) — its mark, read from the primary key's
index alone — says whether the cut kept for it still holds: an ended trial's curve is read and cut
once, a running trial's again only once it has reported more. One cache per open storage (a
scheduler has one), bounded by the rows it keeps, least recently used dropped first. Each cut is also
kept in the database (`storage.ops.cut_curves`, with its mark), so a restarted scheduler reads the
cuts back (tens of milliseconds at 1,000 trials) instead of cutting every trial's rows again.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

Row = tuple[int, int, str, str, int]  # (trial_id, total_batches, metrics_json, end_time, run_id)
Mark = tuple[int, int]  # (row count, last batch count)
Key = tuple[str, int, int]  # (kind, trial_id, max_points)

# Rows kept over all trials: 1,000 trials x 20 points x 2 kinds is 40,000.
MAX_ROWS = 400_000


class CutCurves:
    """Cut curves by (kind, trial, max_points), each with the mark of the rows it was cut from."""

    def __init__(self, max_rows: int = MAX_ROWS) -> None:
        self._max_rows = max_rows
        self._rows = 0
        self._kept: OrderedDict[Key, tuple[Mark, list[Row]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, kind: str, trial_id: int, max_points: int, mark: Mark) -> list[Row] | None:
        """The cut kept for this trial if its rows still have `mark`, else None."""
        key = (kind, trial_id, max_points)
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept[0] != mark:
                return None
            self._kept.move_to_end(key)
            return kept[1]

    def put(self, kind: str, trial_id: int, max_points: int, mark: Mark, rows: list[Row]) -> None:
        key = (kind, trial_id, max_points)
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._rows -= len(old[1])
            if len(rows) > self._max_rows:
                return
            self._kept[key] = (mark, rows)
            self._rows += len(rows)
            while self._rows > self._max_rows:
                _, (_, dropped) = self._kept.popitem(last=False)
                self._rows -= len(dropped)

    @property
    def rows(self) -> int:
        """Rows kept now, over all trials."""
        return self._rows


_CACHES: weakref.WeakKeyDictionary[object, CutCurves] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def of(storage: object) -> CutCurves:
    """The cache of `storage`'s curves (trial ids are only unique within one database)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(storage)
        if cache is None:
            cache = _CACHES[storage] = CutCurves()
        return cache
