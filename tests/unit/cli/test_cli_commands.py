"""Read-side commands against an in-process fake scheduler, and gRPC error messages."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from pedl._metrics import to_struct
from pedl.cli.main import main
from pedl.metric_summary import fold
from pedl.v1 import common_pb2, scheduler_pb2

from .fake_scheduler import Script, serve, step, trial, validation

COMPLETED = common_pb2.EXPERIMENT_STATE_COMPLETED


def _experiment(state: int = COMPLETED) -> scheduler_pb2.GetExperimentResponse:
    return scheduler_pb2.GetExperimentResponse(
        experiment=scheduler_pb2.Experiment(id=7, state=state, description="mnist", num_trials=1),
        trials=[trial(3, state=common_pb2.TRIAL_STATE_COMPLETED, total_batches=200)],
    )


def _trial_detail() -> scheduler_pb2.GetTrialResponse:
    return scheduler_pb2.GetTrialResponse(
        trial=trial(3, state=common_pb2.TRIAL_STATE_COMPLETED, total_batches=200),
        steps=[step(1, 100, 0.5), step(2, 200, 0.25)],
        validations=[validation(2, 200, val_loss=0.3)],
    )


def run(script: Script, *argv: str) -> int:
    with serve(script) as address:
        return main(["--master", address, *argv])


def test_experiment_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(Script(experiments=[_experiment()]), "experiment", "list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "STATE", "NAME", "DESCRIPTION", "TRIALS", "CREATED", "ENDED", "OWNER"]
    assert lines[2].split() == ["7", "COMPLETED", "mnist", "1"]


def test_experiment_describe(capsys: pytest.CaptureFixture[str]) -> None:
    script = Script(experiments=[_experiment()], trials={3: [_trial_detail()]})
    assert run(script, "experiment", "describe", "7") == 0
    out = capsys.readouterr().out
    assert "State:       COMPLETED" in out and "Trial 3" in out and "val_loss" in out
    assert "Training steps" not in out  # those come with --metrics
    assert run(script, "experiment", "describe", "7", "--json", "--metrics") == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["total_batches"] for s in data["trials"][0]["steps"]] == [100, 200]
    assert data["trials"][0]["state"] == "COMPLETED" and data["experiment"]["state"] == "COMPLETED"


def test_not_found_shows_the_servers_details(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(Script(), "experiment", "describe", "99") == 1
    assert capsys.readouterr().err.strip() == "error: experiment 99 not found"


def test_kill(capsys: pytest.CaptureFixture[str]) -> None:
    script = Script()
    assert run(script, "experiment", "kill", "7") == 0
    assert script.killed == [7]
    assert capsys.readouterr().out.strip() == "Killed experiment 7 (state: CANCELED)"


@pytest.mark.parametrize(
    ("final", "code"),
    [(COMPLETED, 0), (common_pb2.EXPERIMENT_STATE_ERROR, 1), (common_pb2.EXPERIMENT_STATE_CANCELED, 1)],
)
def test_wait(final: int, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    script = Script(experiments=[_experiment(common_pb2.EXPERIMENT_STATE_ACTIVE)] * 3 + [_experiment(final)])
    assert run(script, "experiment", "wait", "7") == code
    assert (
        capsys.readouterr().out.splitlines()[0]
        == f"Experiment 7 {common_pb2.ExperimentState.Name(final)[17:]}"
    )


def test_download_model_def(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("pkg/__init__.py")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"x = 1\n"))
    out = tmp_path / "out"
    assert (
        run(
            Script(model_definition=buffer.getvalue()),
            "experiment",
            "download-model-def",
            "7",
            "-o",
            str(out),
        )
        == 0
    )
    assert (out / "pkg" / "__init__.py").read_text() == "x = 1\n"
    assert "Wrote the model definition of experiment 7 (model)" in capsys.readouterr().out
    assert run(Script(), "experiment", "download-model-def", "7", "-o", str(out)) == 2
    assert "not an empty directory" in capsys.readouterr().err


def test_trial_logs(capsys: pytest.CaptureFixture[str]) -> None:
    lines = [common_pb2.LogLine(id=i, trial_id=3, message=f"line {i}\n") for i in (1, 2)]
    script = Script(logs=lines)
    assert run(script, "trial", "logs", "3", "--follow") == 0
    assert capsys.readouterr().out == "line 1\nline 2\n"
    assert script.log_requests[0].follow and script.log_requests[0].trial_id == 3


def test_trial_logs_tail_from_a_scheduler_that_sends_every_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A scheduler from before GetTrialLogs.tail ignores it: the CLI cuts the tail from its one reply,
    and a follow goes on after the newest line without showing the older ones again."""
    lines = [common_pb2.LogLine(id=i, trial_id=3, message=f"line {i}\n") for i in range(1, 9)]
    lines.append(common_pb2.LogLine(id=9, trial_id=3, source="pedl", message="pedl's own\n"))
    script = Script(logs=lines)
    assert run(script, "trial", "logs", "3", "--tail", "2") == 0
    assert capsys.readouterr().out == "line 7\nline 8\n"
    assert [(r.tail, r.follow) for r in script.log_requests] == [(2, False)]
    script.log_requests.clear()
    assert run(script, "trial", "logs", "3", "--tail", "3", "--follow") == 0
    assert capsys.readouterr().out == "line 6\nline 7\nline 8\n"
    assert [(r.tail, r.follow, r.after_id) for r in script.log_requests] == [(3, False, 0), (0, True, 9)]
    script.log_requests.clear()
    assert run(script, "trial", "logs", "3", "--tail", "0", "--follow") == 0  # new lines only
    assert capsys.readouterr().out == ""
    assert [(r.tail, r.follow, r.after_id) for r in script.log_requests] == [(1, False, 0), (0, True, 9)]


def test_trial_describe(capsys: pytest.CaptureFixture[str]) -> None:
    script = Script(experiments=[_experiment()], trials={3: [_trial_detail()]})
    assert run(script, "trial", "describe", "3", "--metrics") == 0
    out = capsys.readouterr().out
    assert "Batches:         200" in out and "Training steps:" in out and "Validations:" in out


def test_trial_describe_shows_its_custom_metric_groups(capsys: pytest.CaptureFixture[str]) -> None:
    reports = [{"loss": 2.0, "fps": 30.0}, {"loss": 4.0, "fps": 10.0}]
    detail = _trial_detail()
    detail.metric_groups.add(group="inference", reports=2, last_batches=150, metrics=to_struct(fold(reports)))
    script = Script(experiments=[_experiment()], trials={3: [detail]})
    assert run(script, "trial", "describe", "3") == 0
    assert script.trial_requests[0].group_figures  # the scheduler folds them only when asked
    out = capsys.readouterr().out
    table = out.split("Metric groups:\n", 1)[1].splitlines()
    assert table[0].split() == ["GROUP", "METRIC", "REPORTS", "LAST", "BATCHES", "LAST", "MIN", "MAX", "MEAN"]
    assert [row.split() for row in table[2:4]] == [
        ["inference", "fps", "2", "150", "10", "10", "30", "20"],
        ["inference", "loss", "2", "150", "4", "2", "4", "3"],
    ]
    assert run(script, "trial", "describe", "3", "--json") == 0
    group = json.loads(capsys.readouterr().out)["metric_groups"]["inference"]
    assert group["reports"] == 2 and group["last_batches"] == 150
    assert group["metrics"]["loss"] | {"sum": None} == {
        "count": 2,
        "min": 2.0,
        "max": 4.0,
        "mean": 3.0,
        "last": 4.0,
        "type": "number",
        "sum": None,
    }
    assert run(script, "trial", "describe", "3", "--csv") == 0
    assert "inference" not in capsys.readouterr().out  # one row per trial: its groups are in --json
    script.metric_series.append(
        scheduler_pb2.MetricSeries(
            trial_id=3,
            group="inference",
            total_batches=[50, 150],
            metrics_json=[json.dumps(r) for r in reports],
            end_time=["2026-01-01T00:00:00Z", ""],
        )
    )
    assert run(script, "trial", "describe", "3") == 0
    assert "Metric group inference:" not in capsys.readouterr().out  # each report: with --metrics
    assert run(script, "trial", "describe", "3", "--metrics") == 0
    rows = capsys.readouterr().out.split("Metric group inference:\n", 1)[1].splitlines()
    assert rows[0].split() == ["BATCHES", "loss", "fps", "ENDED"]
    assert [r.split() for r in rows[2:4]] == [["50", "2", "30", "2026-01-01", "00:00:00"], ["150", "4", "10"]]
    assert run(script, "trial", "describe", "3", "--metrics", "--json") == 0
    history = json.loads(capsys.readouterr().out)["metric_groups"]["inference"]["history"]
    assert history == [
        {"total_batches": 50, "metrics": reports[0], "end_time": "2026-01-01T00:00:00Z"},
        {"total_batches": 150, "metrics": reports[1], "end_time": None},
    ]


def test_trial_describe_without_custom_groups_says_nothing_of_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        run(Script(experiments=[_experiment()], trials={3: [_trial_detail()]}), "trial", "describe", "3") == 0
    )
    assert "Metric groups" not in capsys.readouterr().out


def test_agent_and_slot_list(capsys: pytest.CaptureFixture[str]) -> None:
    agent = scheduler_pb2.Agent(
        id="agent-1", hostname="h", address="10.0.0.5", slots=[common_pb2.Slot(id="0", type="cpu")]
    )
    assert run(Script(agents=[agent]), "agent", "list") == 0
    row = capsys.readouterr().out.splitlines()[2].split()
    assert row == ["agent-1", "h", "10.0.0.5", "1", "0", "-", "yes"]
    assert run(Script(agents=[agent]), "slot", "list") == 0
    assert capsys.readouterr().out.splitlines()[2].split() == ["agent-1", "0", "cpu", "yes", "free"]


def test_unreachable_master(unused_address: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "list", "--master", unused_address]) == 1
    err = capsys.readouterr().err
    hint = "(is the cluster up? `pedl cluster up`)"
    assert err == f"error: cannot reach the pedl scheduler at {unused_address} {hint}\n"


def test_master_from_environment(
    unused_address: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PEDL_MASTER", unused_address)
    assert main(["agent", "list"]) == 1
    assert unused_address in capsys.readouterr().err


def test_malformed_master(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--master", "nohost", "experiment", "list"]) == 2
    assert capsys.readouterr().err.strip() == "error: --master must be HOST:PORT, got 'nohost'"


def test_experiment_config_prints_yaml_that_create_accepts_and_describe_shows_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pedl._metrics import to_struct
    from pedl.config import carried, parse_experiment_config

    written = (
        "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n"
        "environment: {image: 'pytorch:2', environment_variables: [A=1]}\n"
    )
    effective = parse_experiment_config(written).raw
    response = _experiment()
    response.experiment.config.CopyFrom(to_struct(effective))
    response.experiment.config_yaml = parse_experiment_config(written).masked_yaml()
    response.experiment.config_document = carried.masked_json(parse_experiment_config(written))
    script = Script(experiments=[response], trials={3: [_trial_detail()]})
    assert run(script, "experiment", "config", "7") == 0
    printed = capsys.readouterr().out
    again = parse_experiment_config(printed, filename="exported.yaml")
    assert again.raw == effective  # re-submits unchanged
    assert run(script, "experiment", "describe", "7") == 0
    assert "Warning: environment.image: has no effect in pedl" in capsys.readouterr().out


def test_trial_details_are_fetched_a_page_at_a_time() -> None:
    from pedl.cli.client import SchedulerClient

    from .fake_scheduler import serve

    script = Script(trials={i: [_trial_detail()] for i in (3, 4, 5)})
    with serve(script) as address, SchedulerClient(address) as client:
        details = client.trial_details(7, include_steps=False, page=2)
        with_steps = client.trial_details(7, page=1)
    assert len(details) == 3 and all(not d.steps for d in details)
    assert len(with_steps) == 3 and all(d.steps for d in with_steps)


def test_follow_of_many_trials_reads_them_in_one_batch_and_prints_each_step_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pedl.cli import cmd_experiment
    from pedl.cli.client import SchedulerClient

    monkeypatch.setattr(cmd_experiment, "POLL_SECONDS", 0)
    ids = (3, 4, 5, 6, 7)
    done = [trial(i, state=common_pb2.TRIAL_STATE_COMPLETED, total_batches=100) for i in ids]
    experiment = scheduler_pb2.GetExperimentResponse(
        experiment=scheduler_pb2.Experiment(id=7, state=COMPLETED), trials=done
    )
    details = {
        i: [scheduler_pb2.GetTrialResponse(trial=t, steps=[step(1, 100, 0.5)])]
        for i, t in zip(ids, done, strict=True)
    }
    with (
        serve(Script(experiments=[experiment], trials=details)) as address,
        SchedulerClient(address) as client,
    ):
        calls: list[str] = []
        monkeypatch.setattr(client, "get_trial", lambda trial_id: calls.append("get") or None)
        assert cmd_experiment.follow(client, 7) == 0
    out = capsys.readouterr().out
    assert calls == [] and all(out.count(f"Trial {i} step 1:") == 1 for i in ids)
