"""Determined Core API scripts (command entrypoints) on a local cluster, as a user submits them:
a plain loop, metrics, checkpoints surviving a killed agent, ASHA on a time_metric, two processes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import yaml
from test_cluster import logs, stub, submit, wait
from test_faults import trial_history

from pedl.checkpoints import CheckpointStoreClient
from pedl.cli.main import main
from pedl.v1 import common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "examples" / "core_api"
COMPLETED = common_pb2.EXPERIMENT_STATE_COMPLETED


def example_config(name: str, **changes) -> str:
    raw = yaml.safe_load((EXAMPLE / name).read_text())
    raw.update(changes)
    return yaml.safe_dump(raw)


def write_plain_loop(directory: Path) -> Path:
    """Determined's first tutorial stage: a loop that knows nothing of the platform."""
    directory.mkdir(parents=True)
    (directory / "0_start.py").write_text(
        "x = 0\nfor batch in range(100):\n    x += 1\nprint(f'x is now {x}')\n"
    )
    return directory


@pytest.fixture(scope="module")
def one_agent_cluster(tmp_path_factory):
    """One cluster for the tests below but the one that kills an agent: a start costs ~10 s on a loaded
    machine; each test counts only its own experiment's trials. Two slots: the two-process script
    takes both, the ASHA search runs two trials at a time, the others take one."""
    with local_cluster(tmp_path_factory.mktemp("cluster"), agents=1, slots=2) as cluster:
        yield cluster


def test_a_plain_loop_under_a_searcher_without_a_length_completes(one_agent_cluster, tmp_path) -> None:
    config = "name: core-api-stage-0\nentrypoint: python3 0_start.py\nsearcher: {name: single, metric: x}\n"
    cluster = one_agent_cluster
    model = write_plain_loop(tmp_path / "stage0")
    exp_id = submit(cluster, model, config + "max_restarts: 0\n")
    result = wait(cluster, exp_id, timeout=240)
    assert result.experiment.state == COMPLETED, cluster.logs()
    assert "x is now 100" in logs(cluster, result.trials[0].id)
    # Determined 0.20 to 0.34's stage 0 config adds `max_length: 1` ("ignored if the training
    # script ignores it"): the script exits without a metric for the searcher, and completes.
    with_length = config.replace("metric: x}", "metric: x, max_length: 1}")
    exp_id = submit(cluster, model, with_length + "max_restarts: 0\n")
    result = wait(cluster, exp_id, timeout=240)
    assert result.experiment.state == COMPLETED, cluster.logs()
    trial = result.trials[0]
    assert trial.state == common_pb2.TRIAL_STATE_COMPLETED
    assert trial.early_exit == common_pb2.EarlyExitReason.EARLY_EXIT_REASON_USER_REQUESTED_STOP
    assert "having reported no validation metrics" in logs(cluster, trial.id)


def test_a_script_reporting_another_metric_than_a_length_searchers_completes_as_in_determined(
    one_agent_cluster, tmp_path, capsys
) -> None:
    """Determined 0.20 to 0.34's Core API MNIST tutorial stages `metrics` and `checkpoints`: `max_length:
    1` and `metric: val_loss`, a script that reports `test_loss` and never asks the searcher. Determined's
    searcher hears only op.report_completed, so the script runs to its end and the trial completes.
    Determined 0.38's custom metric groups (`report_metrics(group=...)`) are kept apart from both."""
    model = tmp_path / "metrics_stage"
    model.mkdir()
    (model / "report.py").write_text(
        "import determined as det\n"
        "with det.core.init() as core:\n"
        "    for step in (1, 2, 3):\n"
        "        loss = {'test_loss': 1.0 / step}\n"
        "        core.train.report_validation_metrics(steps_completed=step, metrics=loss)\n"
        "        core.train.report_metrics('inf%er en/ce', steps_completed=step, metrics={'m': step})\n"
    )
    config = (
        "entrypoint: python3 report.py\nmax_restarts: 0\n"
        "searcher: {name: single, metric: val_loss, max_length: 1}\n"
    )
    exp_id = submit(one_agent_cluster, model, config)
    result = wait(one_agent_cluster, exp_id, timeout=120)
    assert result.experiment.state == COMPLETED, one_agent_cluster.logs()
    (trial,) = result.trials
    assert trial.early_exit == common_pb2.EarlyExitReason.EARLY_EXIT_REASON_USER_REQUESTED_STOP
    _, validations = trial_history(one_agent_cluster, exp_id)
    assert [(b, m["test_loss"]) for b, m in validations] == [(1, 1.0), (2, 0.5), (3, 1.0 / 3)]
    assert "searcher.metric 'val_loss' (it reported: test_loss)" in logs(one_agent_cluster, trial.id)
    asked = scheduler_pb2.GetMetricsRequest(trial_id=trial.id, group="inf%er en/ce")
    series = [s for reply in stub(one_agent_cluster).GetMetrics(asked, timeout=60) for s in reply.series]
    assert [(s.group, list(s.total_batches), [json.loads(m) for m in s.metrics_json]) for s in series] == [
        ("inf%er en/ce", [1, 2, 3], [{"m": 1}, {"m": 2}, {"m": 3}])
    ]
    capsys.readouterr()
    argv = ["--master", one_agent_cluster.master, "trial", "describe", str(trial.id), "--json", "--metrics"]
    assert main(argv) == 0
    group = json.loads(capsys.readouterr().out)["metric_groups"]["inf%er en/ce"]  # pedl trial describe
    assert (group["reports"], group["last_batches"]) == (3, 3)
    assert [(r["total_batches"], r["metrics"]) for r in group["history"]] == [
        (1, {"m": 1}),
        (2, {"m": 2}),
        (3, {"m": 3}),
    ]
    assert group["metrics"]["m"] == {
        "count": 3, "min": 1.0, "max": 3.0, "mean": 2.0, "sum": 6.0, "last": 3.0, "type": "number"
    }  # fmt: skip


def test_a_string_entrypoint_runs_through_sh_and_a_failing_one_names_its_exit_code(
    one_agent_cluster, tmp_path
) -> None:
    """As Determined's launch runs a string entrypoint (`sh -c`): pipes and `&&` work, and Determined's
    own e2e override `entrypoint: exit 99` fails the trial naming the code, with Determined's line."""
    cluster = one_agent_cluster
    model = write_plain_loop(tmp_path / "piped")
    base = "searcher: {name: single, metric: x}\nmax_restarts: 0\n"
    exp_id = submit(cluster, model, base + "entrypoint: python3 0_start.py | tr a-z A-Z && echo piped\n")
    result = wait(cluster, exp_id, timeout=240)
    assert result.experiment.state == COMPLETED, cluster.logs()
    text = logs(cluster, result.trials[0].id)
    assert "X IS NOW 100" in text and "piped" in text, text

    exp_id = submit(cluster, model, base + "entrypoint: exit 99\n")
    result = wait(cluster, exp_id, timeout=240)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR, cluster.logs()
    (trial,) = result.trials
    assert "the entrypoint 'exit 99' exited with code 99" in trial.error, trial.error
    text = logs(cluster, trial.id)
    assert "resources failed with non-zero exit code" in text and "(exit code 99)" in text, text


def test_metrics_and_checkpoints_of_a_script_are_recorded_like_any_trials(
    one_agent_cluster, tmp_path
) -> None:
    cluster = one_agent_cluster
    exp_id = submit(cluster, EXAMPLE, example_config("single.yaml", entrypoint="python3 train.py --steps 30"))
    result = wait(cluster, exp_id, timeout=180)
    assert result.experiment.state == COMPLETED, cluster.logs()
    steps, validations = trial_history(cluster, exp_id)
    assert [b for b, _ in steps] == [10, 20, 30]
    assert [b for b, _ in validations] == [10, 20, 30]
    assert validations[-1][1]["validation_loss"] < validations[0][1]["validation_loss"]
    (trial,) = result.trials
    assert trial.restarts == 0
    # The default GC policy (save_trial_best 1, save_trial_latest 1) keeps only the last of the
    # three the script stored (also its best); the others are deleted once the trial ends.
    deadline = time.monotonic() + 30
    while True:
        detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
        kept = [
            c.total_batches for c in detail.checkpoints if c.state == common_pb2.CHECKPOINT_STATE_COMPLETED
        ]
        if kept == [30] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert kept == [30], [(c.total_batches, c.state) for c in detail.checkpoints]


def test_a_script_on_a_killed_agent_resumes_from_its_last_store_path_checkpoint(tmp_path) -> None:
    config = example_config("single.yaml", entrypoint="python3 train.py --steps 60 --step-seconds 0.1")
    with local_cluster(tmp_path / "cluster", agents=2) as cluster:
        exp_id = submit(cluster, EXAMPLE, config)
        deadline = time.monotonic() + 120
        while True:
            (trial,) = (
                stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
            )
            detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
            if len(detail.checkpoints) >= 1 and detail.checkpoints[-1].total_batches >= 20:
                break
            assert time.monotonic() < deadline, cluster.logs()
            time.sleep(0.1)
        victim = next(a for a in cluster.agents if a.name == trial.agent_id)
        os.kill(victim.process.pid, signal.SIGKILL)

        result = wait(cluster, exp_id, timeout=240)
        assert result.experiment.state == COMPLETED, cluster.logs()
        assert result.trials[0].restarts == 0  # a lost agent does not spend max_restarts
        text = logs(cluster, trial.id)
        resumed = [line for line in text.splitlines() if "resumed at step" in line]
        assert resumed and int(resumed[0].split("resumed at step ")[1].split()[0]) >= 20, text
        steps, _ = trial_history(cluster, exp_id)
        assert [b for b, _ in steps] == [10, 20, 30, 40, 50, 60]


def test_asha_on_a_time_metric_stops_and_promotes_script_trials(one_agent_cluster) -> None:
    cluster = one_agent_cluster
    exp_id = submit(cluster, EXAMPLE, example_config("asha.yaml"))
    result = wait(cluster, exp_id, timeout=300)
    assert result.experiment.state == COMPLETED, cluster.logs()
    lengths = sorted(t.total_batches for t in result.trials)
    # Two rungs (16 and 64 batches): the best quarter goes on to 64, the rest stop at 16.
    assert lengths[-1] == 64 and lengths[0] < 64, lengths
    assert all(t.state == common_pb2.TRIAL_STATE_COMPLETED for t in result.trials)


def test_a_two_process_script_runs_on_two_slots(one_agent_cluster) -> None:
    cluster = one_agent_cluster
    # One restart allowed: once, on a loaded 2-core machine, a rank died in torch's C++ teardown
    # ("terminate called without an active exception", exit 250); a restart resumes the script
    # from its checkpoint, which is what this platform is for.
    exp_id = submit(cluster, EXAMPLE, example_config("distributed.yaml", max_restarts=1))
    result = wait(cluster, exp_id, timeout=240)
    assert result.experiment.state == COMPLETED, cluster.logs()
    steps, validations = trial_history(cluster, exp_id)
    assert [b for b, _ in steps] == [10, 20, 30, 40]
    assert all(m["workers"] == 2 for _, m in steps)
    assert len(validations) == 4
    (trial,) = result.trials
    (checkpoint,) = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id)).checkpoints
    with CheckpointStoreClient(cluster.store.address) as store:
        files = {f.path for f in store.get(checkpoint.uuid).files}
    assert files == {"model-rank0.pt", "model-rank1.pt", "metadata.json"}  # one sharded checkpoint


LEGACY_OPERATIONS = """
import determined as det

info = det.get_cluster_info()
with det.core.init() as core_context:
    x, batch = 0, 0
    for op in core_context.searcher.operations():
        while batch < op.length:
            x += info.trial.hparams["increment_by"]
            batch += 1
            if batch % 10 == 0:
                core_context.train.report_training_metrics(steps_completed=batch, metrics={"x": x})
                op.report_progress(batch)
        core_context.train.report_validation_metrics(steps_completed=batch, metrics={"x": x})
        op.report_completed(x)
"""


def test_the_legacy_searcher_operations_protocol_trains_to_max_length(one_agent_cluster, tmp_path) -> None:
    model = tmp_path / "legacy"
    model.mkdir()
    (model / "train.py").write_text(LEGACY_OPERATIONS)
    config = (
        "entrypoint: python3 train.py\nhyperparameters: {increment_by: 2}\n"
        "searcher: {name: single, metric: x, max_length: {batches: 30}, smaller_is_better: false}\n"
        "max_restarts: 0\n"
    )
    cluster = one_agent_cluster
    exp_id = submit(cluster, model, config)
    result = wait(cluster, exp_id, timeout=240)
    assert result.experiment.state == COMPLETED, cluster.logs()
    steps, validations = trial_history(cluster, exp_id)
    assert [b for b, _ in steps] == [10, 20, 30]
    assert validations == [(30, {"x": 60})]


def test_pause_reaches_the_script_through_should_preempt_and_activate_resumes_it(
    one_agent_cluster, tmp_path
) -> None:
    config = example_config("single.yaml", entrypoint="python3 train.py --steps 60 --step-seconds 0.05")
    cluster = one_agent_cluster
    exp_id = submit(cluster, EXAMPLE, config)
    deadline = time.monotonic() + 120
    while not trial_history(cluster, exp_id)[0]:
        assert time.monotonic() < deadline, cluster.logs()
        time.sleep(0.1)
    stub(cluster).PauseExperiment(scheduler_pb2.PauseExperimentRequest(experiment_id=exp_id))
    while True:
        paused = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id))
        if paused.trials[0].state == common_pb2.TRIAL_STATE_PAUSED and not paused.trials[0].agent_id:
            break
        assert time.monotonic() < deadline, cluster.logs()
        time.sleep(0.1)
    stub(cluster).ActivateExperiment(scheduler_pb2.ActivateExperimentRequest(experiment_id=exp_id))
    result = wait(cluster, exp_id, timeout=180)
    assert result.experiment.state == COMPLETED, cluster.logs()
    assert result.trials[0].restarts == 0
    text = logs(cluster, result.trials[0].id)
    assert "pedl asked the trial to stop" in text and "resumed at step" in text, text
    steps, _ = trial_history(cluster, exp_id)
    assert [b for b, _ in steps] == [10, 20, 30, 40, 50, 60]
