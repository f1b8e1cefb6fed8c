"""What Determined's SDK reads off a trial's metric reports (`iter_metrics`/`stream_metrics`) and its
checkpoint listing (`Trial.get_checkpoints`): the run that wrote each report, no `batch_metrics` key
where pedl keeps none, and every checkpoint the trial took unless a state filter picks some."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.requests import Request

from pedl._metrics import to_struct
from pedl.config import carried
from pedl.config.experiment import parse_experiment_config
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui.rest.common import ok, results
from pedl_webui.rest.experiments import checkpoint_page
from pedl_webui.rest.trials import metric_reports, trial_checkpoints

CONFIG = "searcher: {name: single, metric: x, max_length: {batches: 30}}\nhyperparameters: {lr: 0.1}\n"
TRAINING, VALIDATION = scheduler_pb2.METRIC_KIND_TRAINING, scheduler_pb2.METRIC_KIND_VALIDATION


def _series(kind: int, runs: list[int]) -> scheduler_pb2.MetricSeries:
    n = len(runs) or 2
    return scheduler_pb2.MetricSeries(
        trial_id=7,
        kind=kind,
        total_batches=[10 * (i + 1) for i in range(n)],
        metrics_json=[json.dumps({"x": 0.5**i}) for i in range(n)],
        end_time=[f"2026-01-01T00:00:0{i}Z" for i in range(n)],
        run_id=runs,
    )


def test_each_training_report_names_its_run_and_has_no_batch_metrics() -> None:
    reply = scheduler_pb2.GetMetricsResponse(series=[_series(TRAINING, [1, 2]), _series(VALIDATION, [1, 1])])
    reports = metric_reports(reply, "training")
    assert [(r["trialRunId"], r["totalBatches"]) for r in reports] == [(1, 10), (2, 20)]
    assert [r["metrics"] for r in reports] == [{"avg_metrics": {"x": 1.0}}, {"avg_metrics": {"x": 0.5}}]
    assert all(r["trialId"] == 7 and r["group"] == "training" for r in reports)


def test_validation_reports_carry_their_runs_under_validation_metrics() -> None:
    reply = scheduler_pb2.GetMetricsResponse(series=[_series(TRAINING, [1, 1]), _series(VALIDATION, [3, 3])])
    reports = metric_reports(reply, "validation")
    assert [r["trialRunId"] for r in reports] == [3, 3]
    assert reports[1]["metrics"] == {"validation_metrics": {"x": 0.5}}


def test_rows_from_a_scheduler_that_sent_no_runs_read_as_run_one() -> None:
    reports = metric_reports(scheduler_pb2.GetMetricsResponse(series=[_series(TRAINING, [])]), "training")
    assert [r["trialRunId"] for r in reports] == [1, 1]


def _request(query: str) -> Request:
    return Request(
        {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": query.encode()}
    )


def _detail() -> scheduler_pb2.GetTrialResponse:
    states = [common_pb2.CHECKPOINT_STATE_DELETED, common_pb2.CHECKPOINT_STATE_MISSING]
    states.append(common_pb2.CHECKPOINT_STATE_COMPLETED)
    return scheduler_pb2.GetTrialResponse(
        trial=scheduler_pb2.Trial(id=7, experiment_id=3, state=common_pb2.TRIAL_STATE_COMPLETED),
        validations=[
            scheduler_pb2.Validation(total_batches=10 * (i + 1), metrics=to_struct({"x": 3 - i}))
            for i in range(3)
        ],
        checkpoints=[
            common_pb2.Checkpoint(
                uuid=f"ck-{i}", trial_id=7, experiment_id=3, total_batches=10 * (i + 1), state=s
            )
            for i, s in enumerate(states)
        ],
    )


def _experiment() -> scheduler_pb2.Experiment:
    document = carried.masked_json(parse_experiment_config(CONFIG))
    return scheduler_pb2.Experiment(
        id=3, config_yaml=CONFIG, config_document=document, searcher_metric="x", smaller_is_better=True
    )


@pytest.mark.parametrize(
    "query, listed",
    [
        ("", [("ck-0", "STATE_DELETED"), ("ck-1", "STATE_DELETED"), ("ck-2", "STATE_COMPLETED")]),
        ("states=STATE_COMPLETED", [("ck-2", "STATE_COMPLETED")]),
        (
            "sortByMetric=x&orderBy=ORDER_BY_ASC",
            [("ck-2", "STATE_COMPLETED"), ("ck-1", "STATE_DELETED"), ("ck-0", "STATE_DELETED")],
        ),
    ],
)
def test_a_trials_checkpoints_are_all_listed_unless_states_pick_some(
    query: str, listed: list[tuple[str, str]]
) -> None:
    page = checkpoint_page(_request(query), _experiment(), [_detail()])
    assert [(c["uuid"], c["state"]) for c in page["checkpoints"]] == listed
    assert page["pagination"]["total"] == len(listed)


def test_nan_and_infinities_go_out_as_determineds_strings() -> None:
    reply = scheduler_pb2.GetMetricsResponse(
        series=[
            scheduler_pb2.MetricSeries(
                trial_id=7, kind=TRAINING, total_batches=[10], end_time=[""], run_id=[1],
                metrics_json=['{"loss": NaN, "up": Infinity, "down": -Infinity, "ok": 0.5}'],
            )
        ]
    )  # fmt: skip
    (line,) = results([{"metrics": metric_reports(reply, "training")}]).splitlines()
    (report,) = json.loads(line)["result"]["metrics"]
    assert report["metrics"]["avg_metrics"] == {
        "loss": "NaN",
        "up": "Infinity",
        "down": "-Infinity",
        "ok": 0.5,
    }
    body = json.loads(ok({"summary": {"mean": float("nan"), "max": [float("-inf")]}}).body)
    assert body == {"summary": {"mean": "NaN", "max": ["-Infinity"]}}
    assert ok({"x": 1.5}).body == b'{"x":1.5}'  # finite values as Starlette writes them


def test_a_nan_validation_is_never_a_checkpoints_best_rank() -> None:
    detail = _detail()
    detail.validations[2].metrics.CopyFrom(to_struct({"x": float("nan")}))
    page = checkpoint_page(_request("sortByMetric=x&orderBy=ORDER_BY_ASC"), _experiment(), [detail])
    assert [c["uuid"] for c in page["checkpoints"]] == ["ck-1", "ck-0", "ck-2"]


class _Pages:
    """The scheduler's GetTrial in two pages, deleted checkpoints only when asked for them."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def call(self, token: str, method: str, request: Any) -> Any:
        self.asked.append(request)
        if method == "GetExperiment":
            return scheduler_pb2.GetExperimentResponse(experiment=_experiment())
        whole = _detail()
        if not request.include_deleted_checkpoints:
            del whole.checkpoints[:2]
        first = not request.page_token
        return scheduler_pb2.GetTrialResponse(
            trial=whole.trial,
            validations=whole.validations[:2] if first else whole.validations[2:],
            checkpoints=[c for c in whole.checkpoints if (c.total_batches <= 20) == first],
            next_page_token="p2" if first else "",
        )


def test_the_trial_checkpoints_route_lists_every_page_with_the_deleted_ones() -> None:
    gateway = _Pages()
    scope = {
        "type": "http", "method": "GET", "path": "/api/v1/trials/7/checkpoints", "query_string": b"",
        "headers": [(b"authorization", b"Bearer tok")], "path_params": {"trialId": 7},
        "app": SimpleNamespace(state=SimpleNamespace(gateway=gateway)),
    }  # fmt: skip
    body = json.loads(trial_checkpoints(Request(scope)).body)
    assert [(c["uuid"], c["state"]) for c in body["checkpoints"]] == [
        ("ck-0", "STATE_DELETED"),
        ("ck-1", "STATE_DELETED"),
        ("ck-2", "STATE_COMPLETED"),
    ]
    assert body["checkpoints"][2]["training"]["validationMetrics"]["avgMetrics"] == {"x": 1.0}
    pages = [r for r in gateway.asked if isinstance(r, scheduler_pb2.GetTrialRequest)]
    assert [(r.page_token, r.include_deleted_checkpoints) for r in pages] == [("", True), ("p2", True)]
