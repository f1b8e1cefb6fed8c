"""Determined's `POST /api/v1/trials/{id}/metrics` and `GET /api/v1/trials/time-series` through
pedl's REST app against a real scheduler: a script's report is recorded as the trial's own results
(pedl's GetTrial shows it), read back side by side, refused for another user in Determined's error
shape, and bad input is one 400 line with nothing stored."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_auth import create_user

from pedl import _grpc
from pedl._metrics import from_struct
from pedl.context import pack
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from pedl_webui.app import build_app
from pedl_webui.gateway import Gateway
from pedl_webui.serve import Server
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster
from support.rest import rest_call

pytestmark = pytest.mark.integration


@dataclass
class Setup:
    url: str
    master: str
    tokens: dict[str, str]
    trial_id: int


def http(setup: Setup, who: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return rest_call(setup.url, setup.tokens[who] if who else None, method, path, body)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("rest-metrics")
    # No agent: the trial stays queued, as an unmanaged script's trial would be to the scheduler.
    with local_cluster(tmp / "cluster", agents=0) as cluster:
        tokens = {name: create_user(cluster, name) for name in ("alice", "bob")}
        tokens["admin"] = cluster.token
        packed = pack(write_tiny_model(Path(tmp) / "model"))
        with _grpc.channel(cluster.master) as channel:
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            alice = (("authorization", f"Bearer {tokens['alice']}"),)
            create = scheduler_pb2.CreateExperimentRequest(
                config_yaml=tiny_config(max_batches=1000),
                model_definition=packed.data,
                model_definition_name=packed.name,
            )
            exp_id = scheduler.CreateExperiment(create, timeout=60, metadata=alice).experiment.id
            listed = scheduler.ListTrialDetails(
                scheduler_pb2.ListTrialDetailsRequest(experiment_id=exp_id), timeout=60, metadata=alice
            )
            trial_id = listed.trials[0].trial.id
        gateway = Gateway(cluster.master)
        server = Server(build_app(gateway), "127.0.0.1", 0)
        thread = server.start_thread()
        try:
            yield Setup(f"http://127.0.0.1:{server.port}", cluster.master, tokens, trial_id)
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            server.stop()
            thread.join(10)
            gateway.close()


def body(trial_id: int, group: str, steps: Any, metrics: Any) -> dict[str, Any]:
    """As Determined 0.38.1's SDK sends it (unset optionals as null)."""
    trial = {
        "metrics": {"avgMetrics": metrics, "batchMetrics": None},
        "trialId": trial_id,
        "trialRunId": 0,
        "stepsCompleted": steps,
        "reportTime": None,
    }
    return {"group": group, "metrics": trial}


def test_reported_metrics_are_the_trials_results_and_read_back_side_by_side(setup: Setup) -> None:
    t = setup.trial_id
    for group, steps, value in (("training", 10, 3.3), ("validation", 10, 3.3), ("training", 20, 2.5)):
        status, answer = http(
            setup, "alice", "POST", f"/api/v1/trials/{t}/metrics", body(t, group, steps, {"lossx": value})
        )
        assert (status, answer) == (200, {})

    # pedl's own API (what its CLI and web UI read) shows them as the trial's steps and validations.
    with _grpc.channel(setup.master) as channel:
        meta = (("authorization", f"Bearer {setup.tokens['alice']}"),)
        got = scheduler_pb2_grpc.SchedulerServiceStub(channel).GetTrial(
            scheduler_pb2.GetTrialRequest(trial_id=t), timeout=60, metadata=meta
        )
    assert [(s.total_batches, from_struct(s.metrics)) for s in got.steps] == [
        (10, {"lossx": 3.3}),
        (20, {"lossx": 2.5}),
    ]
    assert [(v.total_batches, from_struct(v.metrics)) for v in got.validations] == [(10, {"lossx": 3.3})]

    query = f"/api/v1/trials/time-series?trialIds={t}&metricIds=validation.lossx&metricIds=training.lossx"
    status, answer = http(setup, "bob", "GET", query)  # every signed-in user reads (Determined's default)
    assert status == 200
    (compared,) = answer["trials"]
    assert compared["trial"]["id"] == t
    validation, training = compared["metrics"]
    assert (validation["group"], validation["type"]) == ("validation", "METRIC_TYPE_VALIDATION")
    assert [(p["batches"], p["values"]) for p in validation["data"]] == [(10, {"lossx": 3.3})]
    assert [(p["batches"], p["values"]) for p in training["data"]] == [
        (10, {"lossx": 3.3}),
        (20, {"lossx": 2.5}),
    ]

    status, answer = http(
        setup, "alice", "POST", f"/api/v1/trials/{t}/metrics", body(t, "training", 10, {"lossx": 1})
    )
    assert status == 409 and "already has training metrics at steps_completed 10" in answer["message"]


def test_a_custom_groups_reports_are_kept_apart_and_read_back(setup: Setup) -> None:
    """Determined's `report_metrics(group="abc")`: stored in its group, charted beside training by
    `trials/time-series` and streamed by `trial_metrics?group=abc` (the SDK's `iter_metrics("abc")`),
    never among the trial's steps or validations."""
    t = setup.trial_id
    status, answer = http(
        setup, "alice", "POST", f"/api/v1/trials/{t}/metrics", body(t, "abc", 10, {"lossx": 7.5})
    )
    assert (status, answer) == (200, {})
    status, answer = http(
        setup, "alice", "POST", f"/api/v1/trials/{t}/metrics", body(t, "abc", 10, {"lossx": 1})
    )
    assert status == 409 and "already has abc metrics at steps_completed 10" in answer["message"]

    status, answer = http(setup, "bob", "GET", f"/api/v1/trials/time-series?trialIds={t}&metricIds=abc.lossx")
    assert status == 200
    (abc,) = answer["trials"][0]["metrics"]
    assert abc["group"] == "abc" and [(p["batches"], p["values"]) for p in abc["data"]] == [
        (10, {"lossx": 7.5})
    ]

    status, answer = http(setup, "bob", "GET", f"/api/v1/trials/metrics/trial_metrics?trialIds={t}&group=abc")
    assert status == 200
    (report,) = answer["result"]["metrics"]
    assert (report["group"], report["totalBatches"], report["metrics"]) == (
        "abc",
        10,
        {"avg_metrics": {"lossx": 7.5}},
    )

    with _grpc.channel(setup.master) as channel:
        meta = (("authorization", f"Bearer {setup.tokens['alice']}"),)
        got = scheduler_pb2_grpc.SchedulerServiceStub(channel).GetTrial(
            scheduler_pb2.GetTrialRequest(trial_id=t), timeout=60, metadata=meta
        )
    assert all(from_struct(s.metrics) != {"lossx": 7.5} for s in [*got.steps, *got.validations])


def test_another_user_is_refused_in_determineds_error_shape(setup: Setup) -> None:
    t = setup.trial_id
    status, answer = http(
        setup, "bob", "POST", f"/api/v1/trials/{t}/metrics", body(t, "training", 30, {"x": 1})
    )
    assert status == 403
    assert answer["code"] == 7 and "only its owner or an admin may change it" in answer["message"]
    assert "\n" not in answer["message"]
    status, _ = http(setup, "admin", "POST", f"/api/v1/trials/{t}/metrics", body(t, "training", 30, {"x": 1}))
    assert status == 200


@pytest.mark.parametrize(
    ("group", "steps", "metrics", "message"),
    [
        ("a.b", 40, {"x": 1}, "a metric group is 1-64 characters, no dot"),
        ("training", None, {"x": 1}, "metrics.stepsCompleted is required"),
        ("validation", 40, {"x": "high"}, "metric 'x' must be a number"),
        ("training", 40, {"x": {"y": 1}}, "metric 'x' must be a number"),
    ],
)
def test_bad_input_is_one_400_line_and_stores_nothing(
    setup: Setup, group: str, steps: Any, metrics: Any, message: str
) -> None:
    t = setup.trial_id
    status, answer = http(
        setup, "alice", "POST", f"/api/v1/trials/{t}/metrics", body(t, group, steps, metrics)
    )
    assert status == 400 and answer["code"] == 3
    assert message in answer["message"] and "\n" not in answer["message"]
    status, answer = http(setup, "alice", "GET", f"/api/v1/trials/time-series?trialIds={t}&group=training")
    assert status == 200
    assert all(p["batches"] != 40 for m in answer["trials"][0]["metrics"] for p in m["data"])
