"""Rows of Determined's custom metric groups (any group but training and validation): stored once per
trial, group and batch count, and read in the same `MetricRow` pages as steps and validations, so
`GetMetrics` streams a group as it streams those."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, bindparam, func, select, tuple_

from pedl_scheduler.storage.connection import Storage
from pedl_scheduler.storage.ops._insert import insert_new
from pedl_scheduler.storage.tables import metric_groups, trials

# (trial_id, total_batches, metrics_json, end_time, run_id), as results.MetricRow.
GroupRow = tuple[int, int, str, str, int]

_INSERT = insert_new(metric_groups)
_T = metric_groups.c
_COLUMNS = (_T.trial_id, _T.total_batches, _T.metrics_json, _T.end_time, _T.run_id)
_PAST = (
    _T.group_name == bindparam("group"),
    _T.total_batches >= bindparam("from_batches"),
    tuple_(_T.trial_id, _T.total_batches) > tuple_(bindparam("after_trial"), bindparam("after_batches")),
)


def _page(query: Select[Any]) -> Select[Any]:
    return query.order_by(_T.trial_id, _T.total_batches).limit(bindparam("n"))


_ROWS = _page(select(*_COLUMNS).where(_T.trial_id.in_(bindparam("ids", expanding=True)), *_PAST))
_EXPERIMENT_ROWS = _page(
    select(*_COLUMNS)
    .select_from(metric_groups.join(trials, trials.c.id == _T.trial_id))
    .where(trials.c.experiment_id == bindparam("exp_id"), *_PAST)
)
_MARKS = (
    select(_T.trial_id, func.count().label("n"), func.max(_T.total_batches).label("last"))
    .where(_T.trial_id.in_(bindparam("ids", expanding=True)), _T.group_name == bindparam("group"))
    .group_by(_T.trial_id)
)
_OF_TRIAL = (
    select(_T.group_name, _T.total_batches, _T.metrics_json)
    .where(_T.trial_id == bindparam("trial_id"))
    .order_by(_T.group_name, _T.total_batches)
)
_COUNTS = (
    select(_T.group_name, func.count().label("n"), func.max(_T.total_batches).label("last"))
    .where(_T.trial_id == bindparam("trial_id"))
    .group_by(_T.group_name)
    .order_by(_T.group_name)
)
_AT = select(_T.trial_id).where(
    _T.trial_id == bindparam("trial_id"),
    _T.group_name == bindparam("group"),
    _T.total_batches == bindparam("at"),
)


def record(
    s: Storage, trial_id: int, group: str, total_batches: int, metrics_json: str, end_time: str, run_id: int
) -> None:
    """One report; a repeat at a stored batch count is dropped (the caller refuses it first)."""
    row = {
        "trial_id": trial_id,
        "group_name": group,
        "total_batches": total_batches,
        "metrics_json": metrics_json,
        "end_time": end_time,
        "run_id": run_id,
    }
    s.defer(_INSERT[s.dialect], row)


def stored_at(s: Storage, trial_id: int, group: str, total_batches: int) -> bool:
    return bool(s.rows(_AT, {"trial_id": trial_id, "group": group, "at": total_batches}))


def _params(group: str, from_batches: int, after: tuple[int, int], limit: int) -> dict[str, Any]:
    return {
        "group": group,
        "from_batches": from_batches,
        "after_trial": after[0],
        "after_batches": after[1],
        "n": limit,
    }


def rows(
    s: Storage, group: str, trial_ids: list[int], from_batches: int, after: tuple[int, int], limit: int
) -> list[GroupRow]:
    """The group's rows of `trial_ids` at or past `from_batches`, after the (trial, batches) key."""
    found = s.rows(_ROWS, {"ids": trial_ids, **_params(group, from_batches, after, limit)})
    return [(r["trial_id"], r["total_batches"], r["metrics_json"], r["end_time"], r["run_id"]) for r in found]


def experiment_rows(
    s: Storage, group: str, experiment_id: int, from_batches: int, after: tuple[int, int], limit: int
) -> list[GroupRow]:
    found = s.rows(_EXPERIMENT_ROWS, {"exp_id": experiment_id, **_params(group, from_batches, after, limit)})
    return [(r["trial_id"], r["total_batches"], r["metrics_json"], r["end_time"], r["run_id"]) for r in found]


def marks(s: Storage, group: str, trial_ids: list[int]) -> dict[int, tuple[int, int]]:
    """Trial id -> (row count, last batch count) of its rows in the group, for those with any."""
    out: dict[int, tuple[int, int]] = {}
    for start in range(0, len(trial_ids), 500):
        for r in s.rows(_MARKS, {"ids": trial_ids[start : start + 500], "group": group}):
            out[r["trial_id"]] = (int(r["n"]), int(r["last"]))
    return out


def of_trial(s: Storage, trial_id: int) -> list[tuple[str, int, str]]:
    """Every (group, total_batches, metrics_json) report of the trial, by group then batches."""
    found = s.rows(_OF_TRIAL, {"trial_id": trial_id})
    return [(r["group_name"], r["total_batches"], r["metrics_json"]) for r in found]


def counts_of_trial(s: Storage, trial_id: int) -> list[tuple[str, int, int]]:
    """Each of the trial's groups by name: (group, reports, last batch count), read without the rows."""
    found = s.rows(_COUNTS, {"trial_id": trial_id})
    return [(r["group_name"], int(r["n"]), int(r["last"])) for r in found]
