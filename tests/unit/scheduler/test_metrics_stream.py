"""GetMetrics as a user reads it: stored steps and validations in pages, then new ones while following."""

from __future__ import annotations

import asyncio
import json

import pytest

from pedl.v1 import scheduler_pb2
from pedl_scheduler import metrics_stream
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from tests.unit.scheduler.test_storage_ops import storage_with_trials


def query(**fields) -> metrics_stream.MetricsQuery:
    return metrics_stream.MetricsQuery.from_request(scheduler_pb2.GetMetricsRequest(**fields))


def collect(db, q, on_wait=None) -> list[tuple[int, str, int, dict]]:
    async def wait() -> None:
        if on_wait is not None:
            on_wait()

    async def run() -> list[tuple[int, str, int, dict]]:
        rows = []
        async for response in metrics_stream.stream(db, q, wait, min_interval=0):
            for s in response.series:
                kind = "training" if s.kind == scheduler_pb2.METRIC_KIND_TRAINING else "validation"
                for b, m in zip(s.total_batches, s.metrics_json, strict=True):
                    rows.append((s.trial_id, kind, b, json.loads(m)))
        return rows

    return asyncio.run(run())


def with_results(steps_per_trial: int = 3):
    s, exp_id, ids = storage_with_trials("a", "b")
    for t in ids:
        for i in range(1, steps_per_trial + 1):
            result_ops.record_step(s, t, i, i * 100, 100, json.dumps({"loss": 1.0 / i}), "t")
        result_ops.record_validation(s, t, 2, 200, json.dumps({"acc": 0.5}), "t")
    s.flush()
    return s, exp_id, ids


def test_an_experiments_stored_rows_come_in_key_order_across_small_pages() -> None:
    s, exp_id, (a, b) = with_results()
    rows = collect(s, query(experiment_id=exp_id, page_size=2))
    training = [(t, batches) for t, kind, batches, _ in rows if kind == "training"]
    assert training == [(a, 100), (a, 200), (a, 300), (b, 100), (b, 200), (b, 300)]
    assert [(t, m) for t, kind, _, m in rows if kind == "validation"] == [
        (a, {"acc": 0.5}),
        (b, {"acc": 0.5}),
    ]


def test_from_batches_and_kind_narrow_a_trials_rows() -> None:
    s, _, (a, _b) = with_results()
    rows = collect(s, query(trial_id=a, from_batches=200, kind=scheduler_pb2.METRIC_KIND_TRAINING))
    assert [(batches, m["loss"]) for _, _, batches, m in rows] == [(200, 0.5), (300, 1 / 3)]


def test_following_sends_only_new_rows_and_ends_with_the_experiment() -> None:
    s, exp_id, (a, b) = with_results(steps_per_trial=1)
    waits = []

    def progress() -> None:
        waits.append(1)
        if len(waits) == 1:  # a step arrives for a, a validation for b
            result_ops.record_step(s, a, 2, 200, 100, json.dumps({"loss": 0.25}), "t")
            result_ops.record_validation(s, b, 3, 300, json.dumps({"acc": 0.9}), "t")
        else:  # both trials end, then the experiment
            result_ops.record_step(s, a, 3, 300, 100, json.dumps({"loss": 0.125}), "t")
            for t in (a, b):
                trial_ops.end_trial(s, t, "COMPLETED", "", "t9")
            experiment_ops.end_experiment(s, exp_id, "COMPLETED", "", "t9")
        s.flush()

    rows = collect(s, query(experiment_id=exp_id, follow=True), on_wait=progress)
    assert [(t, kind, batches) for t, kind, batches, _ in rows] == [
        (a, "training", 100),
        (b, "training", 100),
        (a, "validation", 200),
        (b, "validation", 200),
        (a, "training", 200),
        (b, "validation", 300),
        (a, "training", 300),  # stored with the trial's end: still sent
    ]
    assert len(waits) == 2


def test_a_paused_trials_rows_end_at_once_unless_followed_and_a_follower_waits_out_the_pause() -> None:
    """Determined's REST stream (no follow) ends after a PAUSED trial's stored rows; pedl's own
    followers (CLI, web UI) keep following a paused trial, which may resume, until it ends."""
    s, _, (a, _b) = with_results(steps_per_trial=2)
    trial_ops.set_trial_state(s, a, "PAUSED")
    s.flush()
    waits = []
    training = scheduler_pb2.METRIC_KIND_TRAINING
    rows = collect(s, query(trial_id=a, kind=training), on_wait=lambda: waits.append(1))
    assert [batches for _, _, batches, _ in rows] == [100, 200] and waits == []

    def resume_then_end() -> None:
        waits.append(1)
        if len(waits) == 1:  # still paused: nothing new
            return
        trial_ops.set_trial_state(s, a, "ACTIVE")
        result_ops.record_step(s, a, 3, 300, 100, json.dumps({"loss": 0.1}), "t")
        trial_ops.end_trial(s, a, "COMPLETED", "", "t9")
        s.flush()

    waits.clear()
    rows = collect(s, query(trial_id=a, kind=training, follow=True), on_wait=resume_then_end)
    assert [batches for _, _, batches, _ in rows] == [100, 200, 300] and len(waits) == 2


def test_unknown_targets_and_bad_requests_are_refused_by_name() -> None:
    s, exp_id, _ = with_results()
    with pytest.raises(LookupError, match="trial 999 not found"):
        collect(s, query(trial_id=999))
    with pytest.raises(LookupError, match="experiment 998 not found"):
        collect(s, query(experiment_id=998))
    with pytest.raises(metrics_stream.MetricsRequestError, match="trial_id or an experiment_id"):
        query()
    with pytest.raises(metrics_stream.MetricsRequestError, match="from_batches"):
        query(trial_id=1, from_batches=-1)
