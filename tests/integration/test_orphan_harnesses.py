"""No harness outlives its agent: kill -9 of the agent while its harness starts, trains or uploads a
checkpoint, with the bubblewrap sandbox and without, spawned or forked from the agent's fork server,
and the harness (and the fork server) is gone within seconds."""

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
FORK_SERVER = b"pedl.harness.zygote"


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _parents() -> dict[int, int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return parents


def harness_pids(root: int) -> list[int]:
    """The processes under the agent `root` that run the harness: spawned harnesses (`pedl.harness`),
    the fork server and the harnesses it forked (`pedl.harness.zygote`), and their bwrap wrappers."""
    parents = _parents()
    under, found = {root}, []
    for _ in range(len(parents)):  # a process's parent may be listed after it: until nothing changes
        more = {pid for pid, parent in parents.items() if parent in under} - under
        if not more:
            break
        under |= more
    for pid in under - {root}:
        if any(arg.startswith(b"pedl.harness") for arg in _argv(pid)):
            found.append(pid)
    return sorted(found)


def wait_for_harness(cluster: LocalCluster, index: int, forked: bool, timeout: float = 180) -> None:
    """Until a harness runs under agent `index` (a forked one: a fork server and a child of it)."""
    root = cluster.agents[index].process.pid
    deadline = time.monotonic() + timeout
    while True:
        pids = harness_pids(root)
        servers = [p for p in pids if FORK_SERVER in _argv(p)]
        if (len(servers) >= 2 and len(servers) == len(pids)) if forked else pids:
            return
        assert time.monotonic() < deadline, f"no {'forked ' if forked else ''}harness started: {pids}"
        time.sleep(0.1)


def kill_agent_and_expect_no_harness(cluster: LocalCluster, index: int) -> None:
    agent = cluster.agents[index].process
    pids = harness_pids(agent.pid)
    assert pids
    os.kill(agent.pid, signal.SIGKILL)
    agent.wait(timeout=10)
    deadline = time.monotonic() + GONE_WITHIN_S
    try:
        while alive := [p for p in pids if _alive(p)]:
            assert time.monotonic() < deadline, (
                f"harness processes {alive} outlived their agent: {[_argv(p) for p in alive]}"
            )
            time.sleep(0.1)
    finally:
        for pid in pids:  # clean-up by PID, whatever the outcome
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


# Spawned harnesses in each phase; forked ones (and their fork server) where the harness itself does
# not notice its agent's end (a training harness also sees the agent's socket close).
PHASES = [
    ("spawn", "starting"),
    ("spawn", "training"),
    ("spawn", "uploading"),
    ("fork", "starting"),
    ("fork", "uploading"),
]


@pytest.mark.parametrize("isolation", ["none", "bwrap"])
def test_a_harness_dies_with_its_agent_in_every_phase(tmp_path, isolation: str) -> None:
    if isolation == "bwrap":
        from pedl_agent.sandbox import bwrap_path, bwrap_problem

        path = bwrap_path()
        if path is None or bwrap_problem(path) is not None:
            pytest.skip("bubblewrap cannot make a sandbox on this machine")
    with local_cluster(tmp_path / "cluster", agents=0, agent_args=["--isolation", isolation]) as cluster:
        api = stub(cluster)
        tiny = write_tiny_model(tmp_path / "tiny")
        slow_model = write_tiny_model(tmp_path / "slow", SLOW_START)
        for index, (start, phase) in enumerate(PHASES):
            cluster.start_agent(index, extra_args=["--harness-start", start])
            wait_for_agent(cluster, f"agent{index}")
            forked = start == "fork"
            if phase == "starting":  # the model definition is still being built
                exp_id = submit(cluster, slow_model, tiny_config())
                wait_for_harness(cluster, index, forked)
                time.sleep(1)
                kill_agent_and_expect_no_harness(cluster, index)
            elif phase == "training":
                exp_id = submit(cluster, tiny, tiny_config(max_batches=10**6, batches_per_step=5))
                wait_for_steps(cluster, exp_id, 1)
                wait_for_harness(cluster, index, forked)
                kill_agent_and_expect_no_harness(cluster, index)
            else:  # uploading a checkpoint: the store stops answering while one is due after every step
                extra = "min_checkpoint_period:\n  batches: 5\n"
                exp_id = submit(
                    cluster, tiny, tiny_config(max_batches=10**6, batches_per_step=5, extra=extra)
                )
                wait_for_steps(cluster, exp_id, 1)
                wait_for_harness(cluster, index, forked)
                os.kill(cluster.store.process.pid, signal.SIGSTOP)
                try:
                    time.sleep(2)  # the next step ends and its checkpoint's upload waits on the store
                    kill_agent_and_expect_no_harness(cluster, index)
                finally:
                    os.kill(cluster.store.process.pid, signal.SIGCONT)
            api.KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=exp_id))
