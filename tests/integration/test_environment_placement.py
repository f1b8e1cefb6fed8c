"""Trials run only on agents offering the experiment's `environment`, even with others idle."""

from __future__ import annotations

import sys
import time

import pytest
from test_cluster import stub, submit, wait

from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration


def test_trials_of_an_environment_run_only_on_the_agent_offering_it(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", agents=1) as cluster:
        cluster.start_agent(1, extra_args=["--environment", f"alt={sys.executable}"])
        deadline = time.monotonic() + 60
        while len(stub(cluster).ListAgents(scheduler_pb2.ListAgentsRequest()).agents) < 2:
            assert time.monotonic() < deadline, cluster.logs()
            time.sleep(0.1)
        config = tiny_config(max_batches=20, extra="environment: alt\n").replace(
            "name: single", "name: random\n  max_trials: 2"
        )
        exp_id = submit(cluster, write_tiny_model(tmp_path / "tiny"), config)
        result = wait(cluster, exp_id)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        assert len(result.trials) == 2
        for trial in result.trials:
            chunks = stub(cluster).GetTrialLogs(scheduler_pb2.GetTrialLogsRequest(trial_id=trial.id))
            lines = [line.message for c in chunks for line in c.lines]
            started = [m for m in lines if " started on agent " in m]
            assert started and all("on agent agent1 " in s for s in started), started
