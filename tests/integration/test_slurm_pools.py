"""A Slurm resource pool against real slurmctld and slurmd: the scheduler sbatches pilot agents for
the pool's queued trials, a search completes through them, a scancel'd pilot's trial resumes from its
checkpoint in another job without spending max_restarts, and a trial Slurm cannot place says why."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from test_cluster import logs, stub, submit, wait

from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import LocalCluster
from support.slurm import SlurmCluster, pedl_on_slurm, unavailable_reason, until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(unavailable_reason() is not None, reason=unavailable_reason() or ""),
]

POOL = "hpc"

SEARCH = """
description: slurm search
hyperparameters:
  learning_rate:
    type: categorical
    vals: [0.05, 0.1, 0.2]
searcher:
  name: grid
  metric: error
  smaller_is_better: true
  max_length:
    batches: {batches}
batches_per_step: 10
min_validation_period:
  batches: 20
min_checkpoint_period:
  batches: 20
max_restarts: 0
resources:
  resource_pool: {pool}
slurm:
  slots_per_node: {slots_per_node}
  sbatch_args: {sbatch_args}
"""


def search_config(
    batches: int = 20, slots_per_node: int = 2, sbatch_args: str = "[]", single: bool = False
) -> str:
    text = SEARCH.format(batches=batches, pool=POOL, slots_per_node=slots_per_node, sbatch_args=sbatch_args)
    if single:
        text = text.replace("vals: [0.05, 0.1, 0.2]", "vals: [0.1]")
    return text


@pytest.fixture(scope="module")
def clusters(tmp_path_factory) -> Iterator[tuple[SlurmCluster, LocalCluster]]:
    with pedl_on_slurm(tmp_path_factory.mktemp("slurm"), POOL) as both:
        yield both


def trials(pedl: LocalCluster, exp_id: int) -> list[scheduler_pb2.Trial]:
    return list(stub(pedl).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials)


def test_a_search_completes_through_slurm_pilot_jobs(clusters, tmp_path: Path) -> None:
    slurm, pedl = clusters
    exp_id = submit(pedl, write_tiny_model(tmp_path / "tiny"), search_config())
    result = wait(pedl, exp_id, timeout=240)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, pedl.logs() + slurm.logs()
    assert len(result.trials) == 3
    assert all(t.state == common_pb2.TRIAL_STATE_COMPLETED and t.total_batches == 20 for t in result.trials)
    # Every trial ran in a pilot job; the pilots leave once idle and Slurm lists no job after them.
    describe = [stub(pedl).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=t.id)) for t in result.trials]
    assert describe
    until(lambda: not slurm.jobs(), "the idle pilot jobs did not end", pedl, slurm, timeout=60)


def test_a_cancelled_pilot_job_resumes_its_trial_elsewhere_without_spending_restarts(
    clusters, tmp_path
) -> None:
    slurm, pedl = clusters
    exp_id = submit(pedl, write_tiny_model(tmp_path / "tiny"), search_config(batches=200, single=True))

    def running_with_checkpoint():
        (trial,) = trials(pedl, exp_id)
        return trial if trial.agent_id.startswith("slurm-") and trial.latest_checkpoint_uuid else None

    trial = until(running_with_checkpoint, "the trial never checkpointed in a pilot job", pedl, slurm)
    first_agent = trial.agent_id
    job = first_agent.split("-")[1]
    slurm.run("scancel", job)

    def elsewhere():
        (t,) = trials(pedl, exp_id)
        return t if t.agent_id.startswith("slurm-") and t.agent_id != first_agent else None

    until(elsewhere, "the trial did not restart in another pilot job", pedl, slurm, timeout=120)
    result = wait(pedl, exp_id, timeout=240)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, pedl.logs() + slurm.logs()
    (done,) = result.trials
    assert done.restarts == 0 and done.total_batches == 200  # max_restarts is 0: it did not spend one


SLOW_STEPS = """
import time as _time

_losses = TinyTrial.losses


def _slow_losses(self, predictions, labels):
    _time.sleep(0.1)  # 60 s of training: longer than a pilot lives before its signal
    return _losses(self, predictions, labels)


TinyTrial.losses = _slow_losses
"""

WALLTIME = """
max_restarts: 0
resources:
  resource_pool: {pool}
slurm:
  sbatch_args: ["--time=2", "--signal=B:USR1@60"]
checkpoint_storage:
  save_trial_latest: 100  # the drains' checkpoints stay listed
"""


def test_a_pilot_near_its_walltime_checkpoints_its_trial_which_resumes_in_the_next_job(
    clusters, tmp_path
) -> None:
    """A 2-minute walltime with the signal 60 s before it (the experiment's sbatch_args win over the
    scheduler's): slurmctld checks time limits every 30 s, so each pilot is signalled 30 to 60 s
    after it starts, mid-trial. The agent drains: the trial checkpoints where it is (the config asks
    no periodic checkpoint) and goes on in a new pilot job from exactly there, spending no restart."""
    slurm, pedl = clusters
    # An idle pilot of the pool (no time limit) would take the trial whatever its slurm: section asks.
    until(lambda: not slurm.jobs(), "earlier pilot jobs did not end", pedl, slurm, timeout=60)
    model = write_tiny_model(tmp_path / "slow")
    with open(model / "__init__.py", "a") as f:
        f.write(SLOW_STEPS)
    config = tiny_config(max_batches=600, validation_period=600, extra=WALLTIME.format(pool=POOL))
    exp_id = submit(pedl, model, config)
    result = wait(pedl, exp_id, timeout=420)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, pedl.logs() + slurm.logs()
    (trial,) = result.trials
    assert trial.restarts == 0 and trial.total_batches == 600
    text = logs(pedl, trial.id)
    assert "its Slurm job nears its walltime: trial" in text, text[-3000:]
    jobs = re.findall(r"started on agent slurm-(\d+)-n1", text)
    assert len(set(jobs)) >= 2, text[-3000:]
    described = stub(pedl).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    # Checkpoints before the last are the drains' own, taken at the batch each pilot had reached.
    drained = sorted(
        (c for c in described.checkpoints if 0 < c.total_batches < 600), key=lambda c: c.total_batches
    )
    assert drained, list(described.checkpoints)
    # The next run went on from there: no step up to the checkpoint was trained again after it
    # (a step trained again replaces its row, with a later end time), and every step came.
    first = drained[0]
    at = datetime.fromisoformat(first.created_at)
    again = [
        s.total_batches
        for s in described.steps
        if s.total_batches <= first.total_batches and datetime.fromisoformat(s.end_time) > at
    ]
    assert not again, (first.total_batches, again)
    batches = sorted(s.total_batches for s in described.steps)
    assert batches == list(range(10, 601, 10)), batches


def test_a_trial_slurm_cannot_place_waits_with_slurms_reason(clusters, tmp_path) -> None:
    slurm, pedl = clusters
    # A pilot of the pool still idle would take the trial whatever its slurm: section asks.
    until(lambda: not slurm.jobs(), "earlier pilot jobs did not end", pedl, slurm, timeout=60)
    config = search_config(single=True, sbatch_args="[--cpus-per-task=64]")
    exp_id = submit(pedl, write_tiny_model(tmp_path / "tiny"), config)

    def reason():
        (t,) = trials(pedl, exp_id)
        return t.waiting_reason if "pending (" in t.waiting_reason else ""

    text = until(reason, "the trial's describe never said why it waits", pedl, slurm, timeout=60)
    assert "waiting for Slurm job" in text and slurm.partition in text
    assert not any(j["reason"] in {"None", ""} for j in slurm.jobs())
    # `pedl agent list`, `pedl slot list` and the web UI's cluster page list the pending job, with
    # Slurm's reason, though it has no agent yet.
    listed = stub(pedl).ListAgents(scheduler_pb2.ListAgentsRequest())
    (job,) = [j for j in listed.pilot_jobs if j.state == "PENDING"]
    assert job.resource_pool == POOL and job.partition == slurm.partition and f"({job.reason})" in text
    assert not any(a.id == f"slurm-{job.job_id}-n1" for a in listed.agents)
    stub(pedl).KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=exp_id))
    # No trial needs the pending job any more: the scheduler scancels it.
    until(lambda: not slurm.jobs(), "the unneeded pending job was not cancelled", pedl, slurm, timeout=60)
    assert os.environ.get("SLURM_CONF") is None  # the test's own Slurm never leaked into this process
