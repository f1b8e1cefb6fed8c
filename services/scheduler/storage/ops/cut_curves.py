"""Cut learning curves kept in the database (`curve_cache`'s copy that outlives a scheduler start).

One row per (trial, kind): the bound it was cut to, the mark (row count, last batch count) of the
rows it was cut from, and the kept rows as JSON. A later cut of the same trial and kind replaces it,
whatever its bound, so the table holds at most two rows per trial.
"""

from __future__ import annotations

import json

from sqlalchemy import bindparam, delete, select

from pedl_scheduler.storage.connection import Storage
from pedl_scheduler.storage.ops._insert import insert_new
from pedl_scheduler.storage.ops.results import MetricRow
from pedl_scheduler.storage.tables import cut_curves

Mark = tuple[int, int]  # (row count, last batch count)
Cut = tuple[Mark, list[MetricRow]]

_OF = select(cut_curves).where(
    cut_curves.c.trial_id.in_(bindparam("ids", expanding=True)),
    cut_curves.c.kind == bindparam("kind_"),
    cut_curves.c.max_points == bindparam("points"),
)
_REPLACE = delete(cut_curves).where(
    cut_curves.c.trial_id == bindparam("trial"), cut_curves.c.kind == bindparam("kind_")
)
_INSERT = insert_new(cut_curves)


def stored(s: Storage, kind: str, max_points: int, trial_ids: list[int]) -> dict[int, Cut]:
    """Trial id -> its stored cut of `kind` to `max_points`, for those of `trial_ids` that have one."""
    cuts: dict[int, Cut] = {}
    for start in range(0, len(trial_ids), 500):  # far under SQLite's bound-parameter limit
        params = {"ids": trial_ids[start : start + 500], "kind_": kind, "points": max_points}
        for r in s.rows(_OF, params):
            trial_id = r["trial_id"]
            rows = [(trial_id, b, m, t, run) for b, m, t, run in json.loads(r["rows_json"])]
            cuts[trial_id] = ((int(r["row_count"]), int(r["last_batches"])), rows)
    return cuts


def store(s: Storage, kind: str, max_points: int, cuts: dict[int, Cut]) -> None:
    """Keeps each trial's cut of `kind`, replacing the one stored before."""
    if not cuts:
        return
    values = [
        {
            "trial_id": trial_id,
            "kind": kind,
            "max_points": max_points,
            "row_count": mark[0],
            "last_batches": mark[1],
            "rows_json": json.dumps([[b, m, t, run] for _, b, m, t, run in rows]),
        }
        for trial_id, (mark, rows) in cuts.items()
    ]
    with s.transaction():
        s.run(_REPLACE, [{"trial": v["trial_id"], "kind_": kind} for v in values])
        s.run(_INSERT[s.dialect], values)
