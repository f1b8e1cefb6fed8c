"""What the web UI's pages are given: metric events a browser can parse, searcher decisions, progress."""

from __future__ import annotations

import json

import pytest

from pedl.config import MASK, carried
from pedl.config.experiment import parse_experiment_config
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui import api, views
from pedl_webui.gateway import GatewayError


def test_a_metrics_event_is_json_a_browser_parses_with_nan_as_null() -> None:
    series = scheduler_pb2.MetricSeries(
        trial_id=3,
        kind=scheduler_pb2.METRIC_KIND_VALIDATION,
        total_batches=[100, 200],
        metrics_json=['{"error": 0.5}', '{"error": NaN, "acc": Infinity}'],
        end_time=["t1", "t2"],
    )
    text = views.metrics_event(scheduler_pb2.GetMetricsResponse(series=[series], caught_up=True))
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {
        "series": [[3, "v", [100, 200], [{"error": 0.5}, {"error": None, "acc": None}]]],
        "caught_up": True,
    }


def test_a_custom_groups_rows_come_as_g_for_the_trial_pages_group_chart() -> None:
    series = scheduler_pb2.MetricSeries(
        trial_id=3, group="inference", total_batches=[50], metrics_json=['{"fps": 9.5}'], end_time=["t1"]
    )
    text = views.metrics_event(scheduler_pb2.GetMetricsResponse(series=[series]))
    assert json.loads(text)["series"] == [[3, "g", [50], [{"fps": 9.5}]]]


def test_the_trial_page_gets_each_custom_groups_name_and_counts() -> None:
    """Its figures the page folds from the group's rows it streams (no fold on each 3 s poll)."""
    detail = scheduler_pb2.GetTrialResponse(trial=trial(3, "ACTIVE", 40))
    detail.metric_groups.add(group="inference", reports=2, last_batches=40)
    page = views.trial_detail(detail, experiment("random").experiment)
    assert page["metric_groups"] == [{"group": "inference", "reports": 2, "last_batches": 40}]
    assert views.trial_detail(scheduler_pb2.GetTrialResponse(trial=trial(4, "ACTIVE", 0)),
                              experiment("random").experiment)["metric_groups"] == []  # fmt: skip


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ("validation", r"the validation rows come without \?group="),
        ("a.b", "a metric group is 1-64 characters, no dot"),
        ("x" * 65, "a metric group is 1-64 characters"),
    ],
)
def test_a_trials_curves_take_one_custom_group_by_name(given: str, error: str) -> None:
    from pedl_webui import pages

    assert pages._group("inf%er en/ce") == "inf%er en/ce" and pages._group("") == ""
    with pytest.raises(GatewayError, match=error) as info:
        pages._group(given)
    assert info.value.status == 400


def trial(
    id_: int, state: str, batches: int, best: float | None = None, parent: int = 0
) -> scheduler_pb2.Trial:
    t = scheduler_pb2.Trial(
        id=id_, experiment_id=1, state=getattr(common_pb2, f"TRIAL_STATE_{state}"), total_batches=batches,
        parent_trial_id=parent,
    )  # fmt: skip
    t.hparams.update({"lr": 0.1, "model": {"layers": 2}})
    if best is not None:
        t.best_validation_metric = best
    return t


PBT = (
    "population_size: 2, num_rounds: 2, length_per_round: {batches: 100}, "
    "replace_function: {truncate_fraction: 0.5}, "
    "explore_function: {resample_probability: 0.5, perturb_factor: 0.2}"
)


def experiment(searcher: str, *trials: scheduler_pb2.Trial) -> scheduler_pb2.GetExperimentResponse:
    fields = PBT if searcher == "pbt" else "max_trials: 4, max_length: {batches: 1000}"
    config = (
        "description: '<b>x</b>'\n"
        f"searcher: {{name: {searcher}, metric: error, {fields}}}\n"
        "hyperparameters:\n  lr: 0.1\n  model: {layers: {type: int, minval: 1, maxval: 4}}\n"
    )
    return response(config, *trials)


def response(config: str, *trials: scheduler_pb2.Trial) -> scheduler_pb2.GetExperimentResponse:
    """What GetExperiment answers: the YAML as written and the typed document the scheduler made of it."""
    document = carried.masked_json(parse_experiment_config(config))
    exp = scheduler_pb2.Experiment(id=1, state=common_pb2.EXPERIMENT_STATE_ACTIVE, config_yaml=config,
                                   config_document=document, searcher_metric="error",
                                   smaller_is_better=True)  # fmt: skip
    return scheduler_pb2.GetExperimentResponse(experiment=exp, trials=list(trials))


def test_asha_shows_which_trials_stopped_at_which_rung_and_progress_counts_planned_trials() -> None:
    detail = views.experiment_detail(
        experiment(
            "adaptive_asha",
            trial(1, "COMPLETED", 100, 0.4),
            trial(2, "COMPLETED", 100, 0.5),
            trial(3, "COMPLETED", 1000, 0.2),
            trial(4, "ACTIVE", 500, 0.3, parent=1),
        )
    )
    assert detail["rungs"] == [{"batches": 100, "stopped_trials": [1, 2]}]
    assert detail["lineage"] == [{"trial_id": 4, "parent_trial_id": 1}]
    assert detail["lineage_title"] == "Resumed from a stopped trial's checkpoint (ASHA promotion)"
    assert detail["progress"] == 0.875  # 3 ended + half of one, of 4 planned
    assert detail["best_metric"] == 0.2
    assert detail["hparam_names"] == ["lr", "model.layers"]
    assert detail["trials"][0]["hparams"] == {"lr": 0.1, "model.layers": 2}


def test_the_compare_page_gets_its_trials_only_and_the_summary_still_counts_all() -> None:
    response = experiment(
        "random", trial(1, "COMPLETED", 1000, 0.4), trial(2, "COMPLETED", 1000, 0.1), trial(3, "ACTIVE", 0)
    )
    detail = views.experiment_detail(response, only={3, 1, 99})
    assert [t["id"] for t in detail["trials"]] == [1, 3]
    assert (detail["num_trials"], detail["best_metric"]) == (3, 0.1)
    assert detail["hparam_names"] == ["lr", "model.layers"]


def test_a_pbt_lineage_is_labelled_an_exploit_and_name_and_notes_show() -> None:
    response = experiment("pbt", trial(1, "COMPLETED", 100), trial(2, "ACTIVE", 100, parent=1))
    response.experiment.name, response.experiment.notes = "mnist-pbt", "try wider"
    detail = views.experiment_detail(response)
    assert detail["lineage_title"] == "Started from another trial's checkpoint (PBT exploit)"
    assert (detail["name"], detail["notes"]) == ("mnist-pbt", "try wider")


def test_random_search_has_no_rungs_and_no_trials_no_progress() -> None:
    assert views.experiment_detail(experiment("random", trial(1, "COMPLETED", 100)))["rungs"] == []
    assert views.experiment_summary(experiment("random"))["progress"] is None


def test_log_events_mark_pedls_lines_apart_from_the_trials_output() -> None:
    lines = [
        common_pb2.LogLine(id=1, trial_id=1, source="pedl", message="trial 1 run 1 started on agent a"),
        common_pb2.LogLine(id=2, trial_id=1, source="stdout", message="<script>alert(1)</script>\n"),
        common_pb2.LogLine(id=3, trial_id=1, source="stderr", message='{"event": "x", "level": "info"}'),
    ]
    event = json.loads(views.log_event(lines))
    assert [(line["id"], line["system"]) for line in event["lines"]] == [(1, True), (2, False), (3, True)]
    assert event["lines"][1]["message"] == "<script>alert(1)</script>"  # as text; pages use textContent


def test_a_masked_hyperparameter_shows_in_the_table_but_is_not_plotted() -> None:
    masked = trial(1, "COMPLETED", 100, 0.4)
    masked.hparams.update({"api_key": MASK})
    detail = views.experiment_detail(experiment("random", masked))
    assert detail["hparam_names"] == ["api_key", "lr", "model.layers"]
    assert detail["plotted_hparams"] == ["lr", "model.layers"]
    assert detail["trials"][0]["hparams"]["api_key"] == MASK


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ({"limit": ["0"]}, "limit must be 1-200, got '0'"),
        ({"limit": ["x"]}, "limit must be 1-200, got 'x'"),
        ({"order": ["sideways"]}, "order must be newest or oldest"),
        (
            {"state": ["running"]},
            "state must be one of ACTIVE, PAUSED, COMPLETED, ERROR, CANCELED, got 'RUNNING'",
        ),
    ],
)
def test_a_bad_experiments_query_is_refused_naming_the_parameter(query: dict, error: str) -> None:
    with pytest.raises(GatewayError) as e:
        api.list_request(query)
    assert e.value.status == 400 and e.value.message == error


def test_the_experiments_query_becomes_one_filtered_scheduler_page() -> None:
    request = api.list_request({"limit": ["5"], "page": ["42"], "state": ["paused"], "q": [" digits "]})
    assert (request.page_size, request.page_token, request.newest_first) == (5, "42", True)
    assert list(request.states) == [common_pb2.EXPERIMENT_STATE_PAUSED]
    assert request.text == "digits" and request.exclude_archived
    everything = api.list_request({"order": ["oldest"], "archived": ["1"]})
    assert not everything.newest_first and not everything.exclude_archived and everything.page_size == 50


def test_the_cluster_page_shows_slurm_pilot_jobs_pending_ones_with_slurms_reason() -> None:
    pending = scheduler_pb2.PilotJob(
        job_id="12", resource_pool="hpc", partition="batch", state="PENDING", reason="Resources", nodes=2
    )
    view = views.cluster_view([], [], [pending])
    assert view["pilot_jobs"] == [
        {
            "job_id": "12", "resource_pool": "hpc", "partition": "batch", "state": "PENDING",
            "reason": "Resources", "nodes": 2, "node_list": "", "time_left": "",
        }
    ]  # fmt: skip
    assert views.cluster_view([], [])["pilot_jobs"] == []


def test_the_cluster_page_shows_checkpoint_gc_tasks_running_and_waiting() -> None:
    running = scheduler_pb2.CheckpointGcTask(
        task_id="t1", experiment_id=3, checkpoint_uuids=["a", "b"], started_at="2026-11-29T18:00:00Z",
        running=True, name="Checkpoint GC (Experiment 3)",
    )  # fmt: skip
    waiting = scheduler_pb2.CheckpointGcTask(
        task_id="t2", experiment_id=4, name="Checkpoint GC (Experiment 4)"
    )
    view = views.cluster_view([], [], [], [running, waiting])
    assert [(t["name"], t["experiment_id"], t["checkpoints"], t["state"]) for t in view["gc_tasks"]] == [
        ("Checkpoint GC (Experiment 3)", 3, 2, "RUNNING"),
        ("Checkpoint GC (Experiment 4)", 4, 0, "WAITING"),
    ]
    assert views.cluster_view([], [])["gc_tasks"] == []
