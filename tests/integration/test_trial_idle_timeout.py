"""`pedl-agent --trial-idle-timeout`: a trial whose step hangs (it reports nothing for that long) is
killed by its agent with one line naming the limit, and the failure spends a restart, as any failure
of the trial's own does (Determined counts it against `max_restarts` too); the slot is free again.

Determined's experiment config has no such field (its `idle_timeout` is for notebooks and commands,
`preemption_timeout` for a preempted trial's checkpoint), so the limit is the agent's."""

from __future__ import annotations

import pytest
from test_cluster import logs, submit, wait

from pedl.v1 import common_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

IDLE_S = 3
# Every run's first batch hangs (an endless wait in the step, after loading finished).
HANGS_IN_TRAINING = "import time; type(self).losses = lambda self, p, l: time.sleep(3600)"


def test_a_trial_that_reports_nothing_is_killed_with_one_line_and_spends_its_restarts(tmp_path) -> None:
    agent_args = ["--trial-idle-timeout", f"{IDLE_S}s"]
    with local_cluster(tmp_path / "cluster", agent_args=agent_args) as cluster:
        try:
            hung = submit(
                cluster,
                write_tiny_model(tmp_path / "hang", HANGS_IN_TRAINING),
                tiny_config(extra="max_restarts: 1\n"),
            )
            result = wait(cluster, hung, timeout=180)
            assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
            (trial,) = result.trials
            assert trial.restarts == 1 and "max_restarts is 1" in trial.error, trial.error
            reason = f"the trial reported nothing for {IDLE_S} s while running a workload"
            assert reason in trial.error and "--trial-idle-timeout" in trial.error, trial.error
            text = logs(cluster, trial.id)
            assert "run 2 started" in text and text.count(reason) >= 2  # each run's log says why
            # The slot is free again: a trial that reports completes.
            good = submit(cluster, write_tiny_model(tmp_path / "good"), tiny_config(max_batches=10))
            assert wait(cluster, good).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
        except BaseException:
            print(cluster.logs())
            raise
