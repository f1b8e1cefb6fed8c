"""A Slurm pool's jobs as Determined's own client and the web UI show them, against real slurmctld and
slurmd: Determined 0.38.1's `det job list` lists a pending pilot job with Slurm's reason, `det trial
describe --json` names the Slurm job a trial runs in, and the web UI's cluster page (in a real
headless Chromium) shows the pending job with its reason."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_cluster import stub, submit

from pedl.v1 import scheduler_pb2
from support.browser import artifacts_dir, chromium, wait_for
from support.models import tiny_config, write_tiny_model
from support.processes import LocalCluster, Service, start, stop
from support.slurm import SlurmCluster, pedl_on_slurm, unavailable_reason, until
from tests.e2e.test_determined_client import Det, install

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(unavailable_reason() is not None, reason=unavailable_reason() or ""),
]

POOL = "hpc"
# More CPUs than the Slurm node has: the pilot job pends, and squeue says why.
UNPLACEABLE = f"""
max_restarts: 0
resources:
  resource_pool: {POOL}
slurm:
  sbatch_args: [--cpus-per-task=64]
"""
PLACEABLE = f"""
max_restarts: 0
resources:
  resource_pool: {POOL}
"""
SLOW = """
import time as _time

_losses = TinyTrial.losses


def _slow_losses(self, predictions, labels):
    _time.sleep(0.2)  # long enough to be seen running in its pilot job
    return _losses(self, predictions, labels)


TinyTrial.losses = _slow_losses
"""


@dataclass
class Env:
    slurm: SlurmCluster
    pedl: LocalCluster
    webui: Service
    det: Det
    tmp: Path

    def until(self, check: Callable[[], Any], what: str, timeout: float = 90) -> Any:
        return until(check, what, self.pedl, self.slurm, timeout)

    def kill(self, exp_id: int) -> None:
        """Kill the experiment; its pilot jobs, pending or idle, leave Slurm's queue."""
        stub(self.pedl).KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=exp_id))
        self.until(lambda: not self.slurm.jobs(), "the experiment's pilot jobs did not end", timeout=120)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("slurm-visible")
    bin_dir = install("0.38.1")
    with pedl_on_slurm(tmp, POOL) as (slurm, pedl):
        webui = start(
            "webui",
            ["pedl-webui", "--master", pedl.master, "--port", "0", "--port-file", str(tmp / "webui.port")],
            tmp,
            tmp / "webui.port",
        )
        try:
            det = Det(bin_dir, f"http://{webui.address}", tmp / "det-home")
            det.login("admin", pedl.admin_password)
            yield Env(slurm, pedl, webui, det, tmp)
        finally:
            stop(webui.process)


def _model(env: Env, name: str, slow: bool = False) -> Path:
    model = write_tiny_model(env.tmp / name)
    if slow:
        with open(model / "__init__.py", "a") as f:
            f.write(SLOW)
    return model


def test_det_and_the_cluster_page_show_a_pending_pilot_job_with_slurms_reason(env: Env) -> None:
    exp_id = submit(env.pedl, _model(env, "tiny"), tiny_config(max_batches=20, extra=UNPLACEABLE))

    def pending() -> scheduler_pb2.PilotJob | None:
        listed = stub(env.pedl).ListAgents(scheduler_pb2.ListAgentsRequest()).pilot_jobs
        return next((j for j in listed if j.state == "PENDING" and j.reason not in ("submitted", "")), None)

    job = env.until(pending, "no pilot job pended with Slurm's reason")
    (row,) = [j for j in env.slurm.jobs() if j["id"] == job.job_id]
    assert row["state"] == "PENDING" and row["reason"] == job.reason

    # Determined's own `det job list`: the job, queued, with Slurm's reason in its name.
    for args in (("job", "list"), ("job", "list", "-p", POOL)):
        out = env.det.ok(*args)
        line = next((x for x in out.splitlines() if f"slurm-{job.job_id} " in x), "")
        assert "EXTERNAL" in line and "QUEUED" in line, out
        assert f"Slurm job {job.job_id}" in line and f"PENDING ({job.reason})" in line, out
    listed = json.loads(env.det.ok("job", "list", "--json"))["jobs"]
    (mine,) = [j for j in listed if j["jobId"] == f"slurm-{job.job_id}"]
    assert mine["resourcePool"] == POOL and mine["summary"]["state"] == "STATE_QUEUED"
    assert f"partition {env.slurm.partition}" in mine["name"], mine
    # The pool itself is listed (with its partition) though no agent of it exists yet.
    assert "EXTERNAL" not in env.det.ok("job", "list", "-p", "default")
    refused = env.det.run("job", "list", "-p", "nosuchpool")
    assert refused.returncode != 0 and "nosuchpool" in refused.stdout + refused.stderr

    # The web UI's cluster page, as a person sees it.
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"http://{env.webui.address}/login")
        page.fill("#username", "admin")
        page.fill("#password", env.pedl.admin_password)
        page.click("button[type=submit]")
        page.wait_for_url("**/experiments")
        page.goto(f"http://{env.webui.address}/cluster")
        rows = page.locator("#pilots tbody tr")
        wait_for(lambda: rows.count() > 0 and page.is_visible("#pilots-section"), 60, "the pilot jobs table")
        text = rows.first.inner_text()
        assert job.job_id in text and "PENDING" in text and f"({job.reason})" in text, text
        assert POOL in text and env.slurm.partition in text, text
        page.screenshot(path=str(artifacts_dir("webui") / "cluster-slurm.png"), full_page=True)
    env.kill(exp_id)
    assert f"slurm-{job.job_id} " not in env.det.ok("job", "list")


def test_det_trial_describe_names_the_slurm_job_the_trial_runs_in(env: Env) -> None:
    config = tiny_config(max_batches=2000, validation_period=2000, extra=PLACEABLE)
    exp_id = submit(env.pedl, _model(env, "slow", slow=True), config)

    def running() -> scheduler_pb2.Trial | None:
        request = scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)
        (trial,) = stub(env.pedl).GetExperiment(request).trials
        return trial if trial.agent_id.startswith("slurm-") and trial.total_batches else None

    # Until it trains (its harness started): a kill then ends it at once, and its idle pilot leaves.
    trial = env.until(running, "the trial never trained in a pilot job", timeout=240)
    job = trial.agent_id.split("-")[1]
    described = json.loads(env.det.ok("trial", "describe", str(trial.id), "--json"))
    assert described["trial"]["metadata"] == {"slurm_job": job, "agent": trial.agent_id}, described
    (row,) = [j for j in env.slurm.jobs() if j["id"] == job]
    assert row["state"] == "RUNNING"
    # The running pilot is in `det job list` too, scheduled, with its node.
    out = env.det.ok("job", "list")
    line = next((x for x in out.splitlines() if f"slurm-{job} " in x), "")
    assert "SCHEDULED" in line and re.search(r"RUNNING on n1", line), out
    env.kill(exp_id)
    # Ended, its pilot job gone from Slurm, the trial still says which job and agent it ran in.
    ended = stub(env.pedl).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id)).trial
    assert (ended.agent_id, list(ended.ran_on), ended.slurm_job) == ("", [trial.agent_id], job), ended
    described = json.loads(env.det.ok("trial", "describe", str(trial.id), "--json"))
    assert described["trial"]["metadata"] == {"slurm_job": job, "agent": trial.agent_id}, described
