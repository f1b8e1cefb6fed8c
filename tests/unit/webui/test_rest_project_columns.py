"""`GET /api/v1/projects/{id}/columns` as Determined's gateway emits it and its e2e
test_experiment_list_columns reads it: the experiment fields, `hp.` columns (nested ones dotted,
typed), and min/max/last/mean columns of each stored training and validation metric."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pedl.config import carried
from pedl.config.experiment import parse_experiment_config
from pedl.v1 import auth_pb2, scheduler_pb2
from pedl_webui.rest.metric_streams import NAME_POINTS
from pedl_webui.rest.project_columns import project_columns
from tests.unit.webui.test_server import request, serving

# As test_experiment_list_columns configures its experiment (the empty leaf gives no column).
CONFIG = (
    "searcher: {name: single, metric: telc, max_length: {batches: 10}}\n"
    "hyperparameters:\n"
    "  flat: 1\n"
    "  nest: {sub1: 1, sub2: 2, empty_leaf: {}}\n"
    "  lr: {type: log, minval: -3, maxval: -1}\n"
    "  opt: {type: const, val: adam}\n"
    "  arch: {type: categorical, vals: [a, 1]}\n"
)


def test_columns_name_each_hyperparameter_and_each_metrics_summary_figures() -> None:
    space = parse_experiment_config(CONFIG).hyperparameters
    columns = project_columns([space, {"flat": {"type": "const", "val": 2}}], [("validation", "telc")])
    by_name = {c["column"]: c for c in columns}
    assert [c["column"] for c in columns[:3]] == ["id", "name", "description"]
    assert by_name["id"] == {
        "column": "id",
        "location": "LOCATION_TYPE_EXPERIMENT",
        "type": "COLUMN_TYPE_NUMBER",
        "displayName": "ID",
    }
    hps = [c["column"] for c in columns if c["location"] == "LOCATION_TYPE_HYPERPARAMETERS"]
    assert hps == ["hp.arch", "hp.flat", "hp.lr", "hp.nest.sub1", "hp.nest.sub2", "hp.opt"]  # once each
    types = {c: by_name[c]["type"] for c in hps}
    assert types["hp.flat"] == types["hp.lr"] == "COLUMN_TYPE_NUMBER"
    assert types["hp.opt"] == "COLUMN_TYPE_TEXT" and types["hp.arch"] == "COLUMN_TYPE_UNSPECIFIED"
    metrics = [c for c in columns if c["location"] == "LOCATION_TYPE_VALIDATIONS"]
    assert [c["column"] for c in metrics] == [f"validation.telc.{a}" for a in ("min", "max", "last", "mean")]
    assert {c["type"] for c in metrics} == {"COLUMN_TYPE_NUMBER"}


def test_custom_metric_groups_give_no_columns() -> None:
    columns = project_columns([], [("training", "loss"), ("abc", "x")])
    assert [c["column"] for c in columns if "." in c["column"]] == [
        f"training.loss.{a}" for a in ("min", "max", "last", "mean")
    ]
    assert columns[-1]["location"] == "LOCATION_TYPE_TRAINING"


class _Call:
    def __init__(self, replies: list[scheduler_pb2.GetMetricsResponse]) -> None:
        self.replies = iter(replies)

    def __iter__(self) -> Iterator[scheduler_pb2.GetMetricsResponse]:
        return self.replies

    def cancel(self) -> None:
        pass


class _Scheduler:
    """One experiment (7) the caller may read, with three validation rows stored: `mid` only in the
    middle one."""

    def whoami(self, token: str) -> auth_pb2.User | None:
        return auth_pb2.User(username="ann") if token == "tok" else None

    def call(self, token: str, method: str, message: Any) -> Any:
        assert (token, method) == ("tok", "ListExperiments") and message.with_config_document
        config = carried.masked_json(parse_experiment_config(CONFIG))
        experiment = scheduler_pb2.Experiment(id=7, config_yaml=CONFIG, config_document=config)
        return scheduler_pb2.ListExperimentsResponse(experiments=[experiment])

    def stream(self, token: str, method: str, message: Any) -> _Call:
        assert (method, message.experiment_id, message.follow) == ("GetMetrics", 7, False)
        assert message.max_points == NAME_POINTS  # the curves' cut: `mid` is in it (test below)
        series = scheduler_pb2.MetricSeries(
            trial_id=1,
            kind=scheduler_pb2.METRIC_KIND_VALIDATION,
            total_batches=[10, 20, 30],
            metrics_json=[json.dumps(m) for m in ({"telc": 1}, {"telc": 2, "mid": 3}, {"telc": 4})],
            end_time=["2026-01-01T00:00:00Z"] * 3,
        )
        return _Call([scheduler_pb2.GetMetricsResponse(series=[series], caught_up=True)])


@pytest.fixture
def url() -> Iterator[str]:
    with serving(_Scheduler()) as address:
        yield address


def test_the_route_answers_as_determineds_e2e_test_reads_it(url: str) -> None:
    status, _, body = request(url, "/api/v1/projects/1/columns", cookie="pedl_session=tok")
    assert status == 200, body
    names = {c["column"] for c in json.loads(body)["columns"]}
    assert {
        "hp.flat",
        "hp.nest.sub1",
        "hp.nest.sub2",
        "validation.telc.last",
        "validation.telc.mean",
        "validation.mid.min",  # stored between the trial's first and last report only
    } <= names

    status, _, body = request(url, "/api/v1/projects/2/columns", cookie="pedl_session=tok")
    assert status == 404 and "pedl has one project, 1" in json.loads(body)["message"]
    status, _, body = request(url, "/api/v1/projects/1/columns")
    assert status == 401
