"""Trials run only on agents offering the experiment's `environment`, even with others idle; a
Determined config's `environment.image` picks the environment the scheduler maps it to
(`--image-environment`), unchanged."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cluster import stub, submit, wait

from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import LocalCluster, local_cluster

pytestmark = pytest.mark.integration

TF28_IMAGE = "determinedai/environments:py-3.8-pytorch-1.12-tf-2.8-cpu-0.20.1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    """agent0 offers the default environment only, agent1 `alt` too; images of TF 2.8 map to `alt`."""
    workdir = tmp_path_factory.mktemp("cluster")
    with local_cluster(workdir, agents=1, scheduler_args=["--image-environment", "*tf-2.8*=alt"]) as running:
        running.start_agent(1, extra_args=["--environment", f"alt={sys.executable}"])
        deadline = time.monotonic() + 60
        while len(stub(running).ListAgents(scheduler_pb2.ListAgentsRequest()).agents) < 2:
            assert time.monotonic() < deadline, running.logs()
            time.sleep(0.1)
        yield running


def _agents_started_on(cluster: LocalCluster, tmp_path: Path, config: str) -> list[str]:
    """Runs the experiment to completion; each of its runs' "started on agent" lines."""
    exp_id = submit(cluster, write_tiny_model(tmp_path / "tiny"), config)
    result = wait(cluster, exp_id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    started = []
    for trial in result.trials:
        chunks = stub(cluster).GetTrialLogs(scheduler_pb2.GetTrialLogsRequest(trial_id=trial.id))
        started += [line.message for c in chunks for line in c.lines if " started on agent " in line.message]
    return started


def test_trials_of_an_environment_run_only_on_the_agent_offering_it(cluster, tmp_path) -> None:
    config = tiny_config(max_batches=20, extra="environment: alt\n").replace(
        "name: single", "name: random\n  max_trials: 2"
    )
    started = _agents_started_on(cluster, tmp_path, config)
    assert len(started) >= 2 and all("on agent agent1 " in s for s in started), started


def test_a_determined_image_runs_in_the_environment_the_scheduler_maps_it_to(cluster, tmp_path) -> None:
    config = tiny_config(max_batches=20, extra=f"environment:\n  image: {TF28_IMAGE}\n").replace(
        "name: single", "name: random\n  max_trials: 2"
    )
    started = _agents_started_on(cluster, tmp_path, config)
    assert len(started) >= 2 and all("on agent agent1 " in s for s in started), started
