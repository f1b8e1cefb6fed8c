"""No harness outlives its agent: kill -9 of the agent while its harness starts, trains or uploads a
checkpoint, with the bubblewrap sandbox and without, and the harness is gone within seconds."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from test_cluster import stub, submit, wait_for_steps

from pedl.v1 import scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import LocalCluster, local_cluster

pytestmark = pytest.mark.integration

# A harness whose agent died must be gone by then (before this change one lingered up to a minute).
GONE_WITHIN_S = 10
SLOW_START = "import time; time.sleep(120)"


def harness_pids(workdir: Path) -> list[int]:
    """This cluster's harness processes (and their bwrap wrappers): `pedl.harness` run in a trial dir."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        # Spawned (`-m pedl.harness`) and forked ones (which keep the fork server's `pedl.harness.zygote`).
        if any(arg.startswith(b"pedl.harness") for arg in cmdline) and cwd.startswith(str(workdir)):
            found.append(int(entry.name))
    return found


def wait_for_harness(workdir: Path, timeout: float = 180) -> list[int]:
    deadline = time.monotonic() + timeout
    while not (pids := harness_pids(workdir)):
        assert time.monotonic() < deadline, "no harness started"
        time.sleep(0.1)
    return pids


def kill_agent_and_expect_no_harness(cluster: LocalCluster, index: int) -> None:
    pids = harness_pids(cluster.workdir)
    assert pids
    os.kill(cluster.agents[index].process.pid, signal.SIGKILL)
    cluster.agents[index].process.wait(timeout=10)
    deadline = time.monotonic() + GONE_WITHIN_S
    try:
        while alive := [p for p in pids if _alive(p)]:
            assert time.monotonic() < deadline, f"harness processes {alive} outlived their agent"
            time.sleep(0.1)
    finally:
        for pid in harness_pids(cluster.workdir):  # clean-up by PID, whatever the outcome
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


def wait_for_agent(cluster: LocalCluster, name: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while name not in {a.id for a in stub(cluster).ListAgents(scheduler_pb2.ListAgentsRequest()).agents}:
        assert time.monotonic() < deadline, cluster.logs()
        time.sleep(0.1)


@pytest.mark.parametrize("isolation", ["none", "bwrap"])
def test_a_harness_dies_with_its_agent_in_every_phase(tmp_path, isolation: str) -> None:
    if isolation == "bwrap":
        from pedl_agent.sandbox import bwrap_path, bwrap_problem

        path = bwrap_path()
        if path is None or bwrap_problem(path) is not None:
            pytest.skip("bubblewrap cannot make a sandbox on this machine")
    agent_args = ["--isolation", isolation]
    with local_cluster(tmp_path / "cluster", agent_args=agent_args) as cluster:
        api = stub(cluster)

        def new_agent(index: int) -> None:
            if index:
                cluster.start_agent(index)
            wait_for_agent(cluster, f"agent{index}")

        def kill(exp_id: int) -> None:
            api.KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=exp_id))

        # 1. Starting: the model definition is still being built.
        new_agent(0)
        slow = submit(cluster, write_tiny_model(tmp_path / "slow", SLOW_START), tiny_config())
        wait_for_harness(cluster.workdir)
        time.sleep(1)
        kill_agent_and_expect_no_harness(cluster, 0)
        kill(slow)

        # 2. Training.
        new_agent(1)
        long = tiny_config(max_batches=10**6, batches_per_step=5)
        training = submit(cluster, write_tiny_model(tmp_path / "tiny"), long)
        wait_for_steps(cluster, training, 1)
        kill_agent_and_expect_no_harness(cluster, 1)
        kill(training)

        # 3. Uploading a checkpoint: the store stops answering while one is due after every step.
        new_agent(2)
        every_step = tiny_config(
            max_batches=10**6, batches_per_step=5, extra="min_checkpoint_period:\n  batches: 5\n"
        )
        uploading = submit(cluster, write_tiny_model(tmp_path / "tiny"), every_step)
        wait_for_steps(cluster, uploading, 1)
        os.kill(cluster.store.process.pid, signal.SIGSTOP)
        try:
            time.sleep(2)  # the next step ends and its checkpoint's upload waits on the store
            kill_agent_and_expect_no_harness(cluster, 2)
        finally:
            os.kill(cluster.store.process.pid, signal.SIGCONT)
        kill(uploading)
