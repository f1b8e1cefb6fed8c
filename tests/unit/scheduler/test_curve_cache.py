"""Cut curves kept per trial: a repeat of a bounded GetMetrics reads only each trial's mark, and a
trial that reported more since is read and cut again, so the chart never shows a stale curve. The
cuts are kept in the database too, so a restarted scheduler reads them back instead of cutting
every trial again."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import func, select, update

from pedl_scheduler import curve_cache
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.tables import cut_curves
from tests.unit.scheduler.test_metrics_stream import collect, query
from tests.unit.scheduler.test_metrics_stream_bounds import long_curves


def test_a_repeat_gives_the_same_cut_from_the_cache() -> None:
    s, exp_id, ids = long_curves(rows=100)
    first = collect(s, query(experiment_id=exp_id, max_points=10, page_size=7))
    assert curve_cache.of(s).rows == len(first)
    assert collect(s, query(experiment_id=exp_id, max_points=10, page_size=7)) == first
    assert {t for t, *_ in first} == set(ids)


def test_a_trial_that_reported_more_is_cut_again_and_the_others_come_from_the_cache() -> None:
    s, exp_id, (a, b, c) = long_curves(rows=100)
    before = collect(s, query(experiment_id=exp_id, max_points=10))
    result_ops.record_validation(s, b, 101, 5000, json.dumps({"error": -7.0}), "t")
    s.flush()
    after = collect(s, query(experiment_id=exp_id, max_points=10))
    assert [r for r in after if r[0] != b] == [r for r in before if r[0] != b]
    b_rows = [(batches, m["error"]) for t, _, batches, m in after if t == b]
    assert b_rows[-1] == (5000, -7.0) and len(b_rows) <= 10


def test_compare_reads_its_trials_through_the_same_cache_and_other_bounds_apart() -> None:
    s, exp_id, (a, b, c) = long_curves(rows=100)
    whole = collect(s, query(experiment_id=exp_id, max_points=10))
    chosen = collect(s, query(experiment_id=exp_id, trial_ids=[c, a], max_points=10))
    assert chosen == [r for r in whole if r[0] in (a, c)]
    finer = collect(s, query(experiment_id=exp_id, trial_ids=[a], max_points=40))
    assert 10 < len(finer) <= 40


def test_the_cache_keeps_at_most_its_bound_newest_used_first() -> None:
    cache = curve_cache.CutCurves(max_rows=5)
    rows = [(1, b, "{}", "t") for b in range(3)]
    cache.put("validation", 1, 10, (3, 2), rows)
    cache.put("validation", 2, 10, (3, 2), rows)  # 6 rows: trial 1's cut goes
    assert cache.get("validation", 1, 10, (3, 2)) is None
    assert cache.get("validation", 2, 10, (3, 2)) == rows
    assert cache.get("validation", 2, 10, (4, 3)) is None  # its rows changed
    assert cache.get("validation", 2, 20, (3, 2)) is None  # another bound
    assert cache.rows == 3


def test_each_database_has_its_own_cache() -> None:
    s1, exp1, _ = long_curves(rows=30)
    s2, exp2, ids2 = long_curves(rows=30)
    result_ops.record_validation(s2, ids2[0], 31, 9999, json.dumps({"error": 3.0}), "t")
    s2.flush()
    one = collect(s1, query(experiment_id=exp1, max_points=10))
    two = collect(s2, query(experiment_id=exp2, max_points=10))
    assert one != two and curve_cache.of(s1) is not curve_cache.of(s2)


def test_cut_curves_outlive_a_scheduler_restart_and_a_trial_that_reported_more_is_cut_again(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "pedl.db")
    s, exp_id, (a, b, c) = long_curves(rows=100, url=db)
    before = collect(s, query(experiment_id=exp_id, max_points=10))
    s.close()
    s = open_storage(db)  # a restarted scheduler: nothing in memory, the same database
    assert collect(s, query(experiment_id=exp_id, max_points=10)) == before
    # What a restarted scheduler sends is the cut it kept, not a new one: one altered by hand shows.
    s.close()
    s = open_storage(db)
    kept = [[10, json.dumps({"error": 42.0}), "t", 1], [1000, json.dumps({"error": 0.5}), "t", 1]]
    s.run(update(cut_curves).where(cut_curves.c.trial_id == a).values(rows_json=json.dumps(kept)))
    after = collect(s, query(experiment_id=exp_id, max_points=10))
    assert [(batches, m["error"]) for t, _, batches, m in after if t == a] == [(10, 42.0), (1000, 0.5)]
    assert [r for r in after if r[0] != a] == [r for r in before if r[0] != a]
    # Trial a reports more: its stored cut no longer holds, so it is read and cut again, and kept.
    result_ops.record_validation(s, a, 101, 5000, json.dumps({"error": -1.0}), "t")
    s.flush()
    s.close()
    s = open_storage(db)
    rows = collect(s, query(experiment_id=exp_id, max_points=10))
    again = [(batches, m["error"]) for t, _, batches, m in rows if t == a]
    assert again[-1] == (5000, -1.0) and 42.0 not in [e for _, e in again] and len(again) <= 10
    row = s.row(select(cut_curves).where(cut_curves.c.trial_id == a))
    assert row is not None and (row["row_count"], row["last_batches"]) == (101, 5000)


def test_a_deleted_experiment_leaves_no_cut_curves() -> None:
    s, exp_id, _ = long_curves(rows=30)
    collect(s, query(experiment_id=exp_id, max_points=10))
    assert s.scalar(select(func.count()).select_from(cut_curves)) == 3
    experiment_ops.delete_experiment(s, exp_id)
    assert s.scalar(select(func.count()).select_from(cut_curves)) == 0
