"""`pedl-agent --trial-pids-limit`: a model definition that forks without end runs into its own trial's
pids cgroup, while a trial of another experiment on the same agent still starts processes and completes;
the bomb's trial fails naming the limit, and afterwards none of its processes is left and its cgroup is
gone. A trial's /dev/shm is its own and counts against its disk limit: written past it, the trial is
killed with the disk-limit line, and nothing it wrote there is left.

The bomb stops itself at 2,000 children, so a broken limit cannot take the machine down."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from test_cluster import logs, submit, wait

from pedl.v1 import common_pb2
from pedl_agent.pids_cgroup import AGENT_PREFIX, V1, V2, choose
from support.models import tiny_config, write_model_with_prelude
from support.processes import local_cluster

LIMIT = 128


def _cgroups_parent() -> Path | None:
    """Where an agent started by this test makes its directory of trial cgroups (None: nowhere)."""
    try:
        plan = choose(LIMIT, Path("/proc/self/cgroup").read_text(), 2, False)
    except OSError:
        return None
    return plan.parent if plan.mechanism in (V1, V2) else None


pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        _cgroups_parent() is None, reason="needs a writable pids cgroup (root, cgroup v1 or v2)"
    ),
]

# Fills its pids cgroup with sleeping children (each marked in its environment), tells the other trial,
# waits until that one has started its own processes and finished, then fails as a real bomb would.
BOMB = """
import os, time
SHARED, MARK = {shared!r}, {mark!r}
with open("/dev/shm/bomb-marker", "w") as f:
    f.write(MARK)
born = 0
try:
    while born < 2000:  # posix_spawn: no fork handler (gRPC's) runs in between
        os.posix_spawn("/bin/sleep", ["sleep", "600"], {{"PEDL_BOMB": MARK}})
        born += 1
finally:
    open(os.path.join(SHARED, "bomb-full"), "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(SHARED, "benign-done")) and time.monotonic() < deadline:
        time.sleep(0.1)
"""
# Waits until the bomb has filled its cgroup, then starts processes of its own.
BENIGN = """
import os, subprocess, time
SHARED = {shared!r}
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(SHARED, "bomb-full")) and time.monotonic() < deadline:
    time.sleep(0.1)
for _ in range(20):
    subprocess.run(["/bin/true"], check=True)
open(os.path.join(SHARED, "benign-done"), "w").close()
"""
FILLS_SHM = """
import os, time
with open("/dev/shm/filler", "wb") as f:
    for _ in range(48):
        f.write(os.urandom(1 << 20))
        f.flush()
time.sleep(120)
"""


# A variable Python reads at start: the bomb's harness is spawned (entering its cgroup before it execs),
# the other trial's forked from the fork server (entering it before it runs trial code).
SPAWNED = "environment:\n  environment_variables: [PYTHONHASHSEED=0]\n"


def _model(tmp: Path, name: str, prelude: str) -> Path:
    return write_model_with_prelude(tmp / name, prelude)


def _marked(mark: str) -> list[int]:
    """Live processes whose environment carries the bomb's mark."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if mark.encode() in (proc / "environ").read_bytes() and "Z" not in _state(proc):
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def _state(proc: Path) -> str:
    for line in (proc / "status").read_text().splitlines():
        if line.startswith("State:"):
            return line.split()[1]
    return ""


def test_a_fork_bomb_fills_only_its_own_cgroup_and_leaves_nothing(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # a root agent's trials run as an unprivileged user
    mark = f"pedl-bomb-{uuid.uuid4().hex}"
    agent_args = [
        "--trial-pids-limit", str(LIMIT),
        "--trial-disk-limit", "32M",
        "--trial-disk-poll", "0.2",
        "--bind", str(shared),
    ]  # fmt: skip
    once = "max_restarts: 0\n"
    with local_cluster(tmp_path / "cluster", slots=2, agent_args=agent_args) as cluster:
        try:
            bomb = submit(
                cluster,
                _model(tmp_path, "bomb", BOMB.format(shared=str(shared), mark=mark)),
                tiny_config(max_batches=10, extra=once + SPAWNED),
            )
            benign = submit(
                cluster,
                _model(tmp_path, "benign", BENIGN.format(shared=str(shared))),
                tiny_config(max_batches=10, extra=once),
            )
            done = wait(cluster, benign, timeout=240)
            assert done.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
            failed = wait(cluster, bomb, timeout=240)
            assert failed.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
            (trial,) = failed.trials
            assert f"the trial reached its process limit of {LIMIT}" in trial.error, trial.error
            assert "--trial-pids-limit" in trial.error.splitlines()[0], trial.error
            assert "process limit" in logs(cluster, trial.id)
            assert (shared / "bomb-full").exists() and (shared / "benign-done").exists()
            lines = cluster.agents[0].log().splitlines()
            events = [json.loads(line) for line in lines if line.startswith("{")]
            how = {e["trial_id"]: e["event"] for e in events if e.get("event", "").startswith("harness ")}
            assert how == {trial.id: "harness started", done.trials[0].id: "harness forked"}, how

            deadline = time.monotonic() + 30
            while _marked(mark) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _marked(mark) == []  # every child of the bomb died with its trial
            parent = _cgroups_parent()
            assert parent is not None
            home = parent / f"{AGENT_PREFIX}{cluster.agents[0].process.pid}"
            assert home.is_dir(), "the agent made no directory of trial cgroups"
            assert not [p for p in home.iterdir() if p.is_dir()]  # each run's is gone
            assert not [p for p in Path("/dev/shm").glob("pedl-*/bomb-marker")]  # its /dev/shm went too

            # /dev/shm is the trial's own and counts against its disk limit.
            shm = submit(cluster, _model(tmp_path, "shm", FILLS_SHM), tiny_config(max_batches=10, extra=once))
            filled = wait(cluster, shm, timeout=240)
            assert filled.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
            assert "per-trial disk limit of 32.0 MiB" in filled.trials[0].error, filled.trials[0].error
            assert not Path("/dev/shm/filler").exists()
            assert not [p for p in Path("/dev/shm").glob("pedl-*/filler")]
        except BaseException:
            print(cluster.logs())
            raise
    assert not home.exists()  # the agent removed its directory when it stopped
