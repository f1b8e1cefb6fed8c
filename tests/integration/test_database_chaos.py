"""A search outlives its PostgreSQL: the database is stopped for a few seconds while trials report
steps, validations and checkpoints, then started again. Every trial completes with each step,
validation and checkpoint recorded once (none lost, none twice), the scheduler keeps running and
says one line while the database is away, and no harness is left behind.

Before: a PostgreSQL restart wedged the scheduler (`This Connection is closed` on every call) until
it was killed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest
from test_cluster import stub, submit, wait, wait_for_steps
from test_orphan_harnesses import FORK_SERVER, _argv, _parents, harness_pids

from pedl.checkpoints import CheckpointStoreClient
from pedl.v1 import common_pb2, scheduler_pb2
from support.db_fixtures import own_server
from support.models import write_tiny_model
from support.postgres import PostgresServer, start_again, stop_server
from support.processes import local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DOWN_S = 4
LENGTH = 300
PER_STEP = 20

SEARCH = f"""
description: a grid over a stopped database
hyperparameters:
  learning_rate:
    type: categorical
    vals: [0.05, 0.1, 0.2]
searcher:
  name: grid
  metric: error
  smaller_is_better: true
  max_length:
    batches: {LENGTH}
batches_per_step: {PER_STEP}
min_validation_period:
  batches: 60
min_checkpoint_period:
  batches: 60
max_restarts: 0
"""


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    """A server of this module's own: its tests stop and start it."""
    yield from own_server()


def leftover_harnesses(agent_pid: int) -> list[tuple[int, int, bytes]]:
    """Harness processes under the agent other than its fork server (which lives as long as the
    agent; the harnesses it forks carry its argv too): (pid, parent, argv) of each."""
    parents = _parents()
    left = []
    for pid in harness_pids(agent_pid):
        argv = b" ".join(_argv(pid))
        forked = _argv(parents.get(pid, 0)) == _argv(pid)
        if forked or FORK_SERVER not in argv:
            left.append((pid, parents.get(pid, 0), argv))
    return left


def _wait_through_restart(cluster, exp_id: int) -> scheduler_pb2.GetExperimentResponse:
    """`wait`, through the moment the scheduler restarts in place to reload its state."""
    deadline = time.monotonic() + 240
    while True:
        try:
            return wait(cluster, exp_id, timeout=240)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE and time.monotonic() < deadline, e
            time.sleep(0.5)


def test_a_search_completes_with_nothing_lost_or_twice_across_a_postgres_outage(pg, tmp_path) -> None:
    scheduler_args = ["--db", pg.url(), "--db-check-interval", "0.2"]
    with local_cluster(tmp_path / "cluster", slots=2, scheduler_args=scheduler_args) as cluster:
        try:
            exp_id = submit(cluster, write_tiny_model(tmp_path / "tiny"), SEARCH)
            wait_for_steps(cluster, exp_id, 2, timeout=180)
            log_before = len(cluster.scheduler.log())
            stop_server(pg.process)
            time.sleep(DOWN_S)
            outage_log = cluster.scheduler.log()[log_before:]
            start_again(pg)

            result = _wait_through_restart(cluster, exp_id)
            assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
            assert cluster.scheduler.process.poll() is None  # it never went down
            checkpoint_uuids: list[str] = []
            with CheckpointStoreClient(cluster.store.address) as store:
                for trial in result.trials:
                    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
                    assert trial.state == common_pb2.TRIAL_STATE_COMPLETED and trial.restarts == 0
                    # Each step and validation once, in order: none lost, none recorded twice.
                    steps = [s.total_batches for s in detail.steps]
                    assert steps == list(range(PER_STEP, LENGTH + 1, PER_STEP)), steps
                    validations = [v.total_batches for v in detail.validations]
                    assert validations == list(range(60, LENGTH + 1, 60)), validations
                    kept = [c for c in detail.checkpoints if c.state == common_pb2.CHECKPOINT_STATE_COMPLETED]
                    assert kept and kept[-1].total_batches == LENGTH
                    batches = [c.total_batches for c in detail.checkpoints]
                    assert len(batches) == len(set(batches)), batches  # no checkpoint twice
                    for c in kept:
                        assert store.get(c.uuid).trial_id == trial.id  # listed, so stored
                    checkpoint_uuids += [c.uuid for c in detail.checkpoints]
            assert len(checkpoint_uuids) == len(set(checkpoint_uuids))

            # One line says why, not a traceback per call or tick.
            said = [line for line in outage_log.splitlines() if "database" in line]
            assert said and all(
                "health NOT_SERVING" in line or "waiting for it, then restarting" in line for line in said
            ), outage_log
            assert "Traceback" not in outage_log, outage_log
            deadline = time.monotonic() + 90
            while left := [p for agent in cluster.agents for p in leftover_harnesses(agent.process.pid)]:
                assert time.monotonic() < deadline, f"harnesses outlived their trials: {left}"
                time.sleep(0.2)
        except BaseException:
            print(cluster.logs())
            raise
