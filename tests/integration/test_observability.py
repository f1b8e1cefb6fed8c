"""Operating pedl: the scheduler's Prometheus endpoint and `pedl tensorboard`, on a real cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_cluster import submit, wait

from pedl.cli.client import SchedulerClient
from pedl.v1 import common_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster, on_a_free_port, stop

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A cluster whose scheduler serves /metrics on a free port, after one tiny experiment completed."""
    workdir = tmp_path_factory.mktemp("observability")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PEDL_SCHEDULER_METRICS_PORT", "0")
        env.setenv("PEDL_SCHEDULER_METRICS_PORT_FILE", str(workdir / "cluster" / "metrics.port"))
        with local_cluster(workdir / "cluster") as cluster:
            try:
                exp_id = submit(cluster, write_tiny_model(workdir / "tiny"), tiny_config(max_batches=40))
                result = wait(cluster, exp_id)
                assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
                yield cluster, exp_id, result.trials[0].id
            except BaseException:
                print(cluster.logs())
                raise


def scrape(cluster) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    port = (cluster.workdir / "metrics.port").read_text().strip()
    url = f"http://127.0.0.1:{port}/metrics"
    with pytest.raises(urllib.error.HTTPError) as refused:  # what a trial on this host gets
        urllib.request.urlopen(url, timeout=30)
    assert refused.value.code == 401
    secret = cluster.secret_file.read_text().strip()  # the token without --metrics-token-file
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {secret}"})
    text = urllib.request.urlopen(request, timeout=30).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_scheduler_serves_prometheus_metrics_of_its_state(trained) -> None:
    cluster, _, _ = trained
    values = scrape(cluster)
    assert values[("pedl_trials", (("state", "COMPLETED"),))] == 1
    assert values[("pedl_trials", (("state", "ACTIVE"),))] == 0
    assert values[("pedl_experiments", (("state", "COMPLETED"),))] == 1
    assert values[("pedl_trials_queued", ())] == 0
    assert values[("pedl_trials_running", ())] == 0
    assert values[("pedl_agents_connected", (("resource_pool", "default"),))] == 1
    assert values[("pedl_slots_total", (("resource_pool", "default"),))] == 1
    assert values[("pedl_slots_used", (("resource_pool", "default"),))] == 0
    assert values[("pedl_step_results_total", ())] == 4
    assert values[("pedl_validation_results_total", ())] == 2
    assert values[("pedl_checkpoints_total", ())] >= 1
    create = (
        "pedl_scheduler_rpc_duration_seconds_count",
        (("code", "OK"), ("method", "/pedl.v1.SchedulerService/CreateExperiment")),
    )
    assert values[create] == 1
    get = (
        "pedl_scheduler_rpc_duration_seconds_count",
        (("code", "OK"), ("method", "/pedl.v1.SchedulerService/GetExperiment")),
    )
    assert values[get] >= 1


def test_metrics_sync_writes_event_files_tensorboard_reads_back(trained, tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from pedl.tensorboard import MetricsSync, run_dir

    cluster, exp_id, trial_id = trained
    with SchedulerClient(cluster.master) as client:
        sync = MetricsSync(client, tmp_path, [exp_id])
        assert sync.refresh() is True
        assert sync.refresh() is True  # nothing new: nothing written twice
        sync.close()
        detail = client.get_trial(trial_id)

    training = EventAccumulator(str(run_dir(tmp_path, exp_id, trial_id, "training")))
    training.Reload()
    assert {"loss", "accuracy"} <= set(training.Tags()["scalars"])
    losses = training.Scalars("loss")
    assert [e.step for e in losses] == [10, 20, 30, 40]
    expected = [s.metrics.fields["loss"].number_value for s in detail.steps]
    assert [e.value for e in losses] == pytest.approx(expected, rel=1e-6)

    validation = EventAccumulator(str(run_dir(tmp_path, exp_id, trial_id, "validation")))
    validation.Reload()
    assert {"validation_loss", "error"} <= set(validation.Tags()["scalars"])
    assert [e.step for e in validation.Scalars("error")] == [20, 40]

    # A second sync over the same logdir replaces pedl's files instead of duplicating events.
    with SchedulerClient(cluster.master) as client:
        again = MetricsSync(client, tmp_path, [exp_id])
        again.refresh()
        again.close()
    reread = EventAccumulator(str(run_dir(tmp_path, exp_id, trial_id, "training")))
    reread.Reload()
    assert [e.step for e in reread.Scalars("loss")] == [10, 20, 30, 40]


def _get(url: str) -> bytes | None:
    try:
        return urllib.request.urlopen(url, timeout=10).read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def _runs(body: bytes | None) -> list[str]:
    try:
        return json.loads(body) if body else []
    except ValueError:  # not TensorBoard answering (yet)
        return []


def _serve_tensorboard(master: str, exp_id: int, run: str, logdir: Path, log: Path, port: int):
    """`pedl tensorboard` on `port`, once it lists `run`; stopped, its log raised, if it exits first
    (another process may have taken the port since free_port() picked it: on_a_free_port retries)."""
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "pedl"), "--master", master, "tensorboard", str(exp_id)]
            + ["--port", str(port), "--logdir", str(logdir), "--refresh", "1"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        runs: list[str] = []
        deadline = time.monotonic() + 180
        while run not in runs:
            if process.poll() is not None:
                raise AssertionError(f"pedl tensorboard exited: {log.read_text(errors='replace')}")
            assert time.monotonic() < deadline, f"TensorBoard never listed {run}:\n{log.read_text()}"
            runs = _runs(_get(f"http://127.0.0.1:{port}/data/runs"))
            time.sleep(0.5)
    except BaseException:
        stop(process)
        raise
    return process, port, runs


def test_pedl_tensorboard_serves_the_experiment_over_http(trained, tmp_path) -> None:
    cluster, exp_id, trial_id = trained
    logdir = tmp_path / "tb"
    log = tmp_path / "tensorboard.log"
    run = f"exp-{exp_id}/trial-{trial_id}/training"
    process, port, runs = on_a_free_port(
        lambda port: _serve_tensorboard(cluster.master, exp_id, run, logdir, log, port)
    )
    try:
        assert f"exp-{exp_id}/trial-{trial_id}/validation" in runs
        assert _get(f"http://127.0.0.1:{port}/") is not None
        assert f"TensorBoard at http://127.0.0.1:{port}/" in log.read_text()
        assert list(
            (logdir / f"exp-{exp_id}" / f"trial-{trial_id}" / "training").glob("events.out.tfevents.*")
        )
    finally:
        stop(process)
    assert _get(f"http://127.0.0.1:{port}/") is None  # TensorBoard went with the command


def test_pedl_tensorboard_names_a_missing_experiment(trained) -> None:
    cluster, _, _ = trained
    result = subprocess.run(
        [str(Path(sys.executable).parent / "pedl"), "--master", cluster.master, "tensorboard", "999"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "999" in result.stderr and "Traceback" not in result.stderr
