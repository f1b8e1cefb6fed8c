"""GetMetrics with max_points and trial_ids: each trial's curve bounded (its ends, peaks and dips
kept) however the rows fall into pages, and a compare view's chosen trials only."""

from __future__ import annotations

import json

import pytest

from pedl import downsample
from pedl_scheduler import metrics_stream
from pedl_scheduler.storage.ops import results as result_ops
from tests.unit.scheduler.test_metrics_stream import collect, query
from tests.unit.scheduler.test_storage_ops import storage_with_trials


def long_curves(rows: int = 300, url: str = ":memory:"):
    """Three trials of `rows` validations each; trial b has a dip at row 123 and a peak at row 200."""
    s, exp_id, ids = storage_with_trials("a", "b", "c", url=url)
    for n, t in enumerate(ids):
        for v in range(1, rows + 1):
            error = 1.0 / v + 0.01 * n
            if n == 1 and v == 123:
                error = -5.0
            if n == 1 and v == 200:
                error = 9.0
            result_ops.record_validation(s, t, v, v * 10, json.dumps({"error": error}), "t")
    s.flush()
    return s, exp_id, ids


@pytest.mark.parametrize("page_size", [7, 250, 5000])
def test_each_trials_curve_is_bounded_with_its_ends_peaks_and_dips_across_pages(page_size: int) -> None:
    s, exp_id, (a, b, c) = long_curves()
    rows = collect(s, query(experiment_id=exp_id, max_points=20, page_size=page_size))
    for t in (a, b, c):
        batches = [batches for trial, _, batches, _ in rows if trial == t]
        assert 2 < len(batches) <= 20
        assert batches == sorted(set(batches)) and batches[0] == 10 and batches[-1] == 3000
    errors = {batches: m["error"] for trial, _, batches, m in rows if trial == b}
    assert errors[1230] == -5.0 and errors[2000] == 9.0


def test_without_max_points_every_row_comes() -> None:
    s, exp_id, _ = long_curves(rows=40)
    assert len(collect(s, query(experiment_id=exp_id))) == 120


def test_trial_ids_stream_only_the_chosen_trials_and_end_with_them() -> None:
    s, exp_id, (a, b, c) = long_curves(rows=30)
    from pedl_scheduler.storage.ops import trials as trial_ops

    for t in (a, c):
        trial_ops.end_trial(s, t, "COMPLETED", "", "t9")
    s.flush()
    # Following, the stream ends once the chosen trials have ended, though b (and the experiment) run on.
    rows = collect(s, query(experiment_id=exp_id, trial_ids=[c, a], follow=True, max_points=10))
    assert {trial for trial, *_ in rows} == {a, c}
    assert all(sum(1 for r in rows if r[0] == t) <= 10 for t in (a, c))


def test_a_trial_of_another_experiment_or_a_bad_bound_is_refused() -> None:
    s, exp_id, (a, _b, _c) = long_curves(rows=2)
    with pytest.raises(LookupError, match=f"trial 999 is not a trial of experiment {exp_id}"):
        collect(s, query(experiment_id=exp_id, trial_ids=[a, 999]))
    with pytest.raises(metrics_stream.MetricsRequestError, match="max_points must be 0"):
        query(experiment_id=exp_id, max_points=1)
    with pytest.raises(metrics_stream.MetricsRequestError, match="trial_ids picks trials of an experiment"):
        query(trial_id=a, trial_ids=[a])


def test_the_curves_cut_holds_every_metric_name_a_number_was_stored_for() -> None:
    """What the web UI's metric names and project columns read (`max_points` = the curves' cut): 98
    metrics each stored in one middle row of 1,000 are all in it, with `loss` (99 names, what the cut
    holds per trial: `downsample.keep`); a first-and-last cut has none of them."""
    s, exp_id, (a, _b, _c) = storage_with_trials("a", "b", "c")
    once = {1 + 10 * k: f"m{k:02}" for k in range(98)}  # rows 1, 11, ..., 971 of trial a
    for v in range(1000):
        metrics = {"loss": 1.0 / (v + 1), **({once[v]: float(v)} if v in once else {})}
        result_ops.record_step(s, a, v + 1, (v + 1) * 10, 10, json.dumps(metrics), "t")
    s.flush()
    rows = collect(s, query(experiment_id=exp_id, max_points=downsample.MAX_POINTS))
    assert len(rows) <= downsample.MAX_POINTS
    assert {name for *_, metrics in rows for name in metrics} == {"loss", *once.values()}
    ends = collect(s, query(experiment_id=exp_id, max_points=2))
    assert {name for *_, metrics in ends for name in metrics} == {"loss"}
