"""On a real cluster: `det trial kill` stops one trial while its experiment goes on and completes with
the others, and `det agent|slot disable` still holds after the scheduler is killed and restarted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.models import write_tiny_model
from support.processes import local_cluster, wait_for_agents

pytestmark = pytest.mark.integration
DET = str(Path(sys.executable).parent / "det")

GRID = """
hyperparameters:
  learning_rate:
    type: categorical
    vals: [0.1, 0.05, 0.02]
searcher:
  name: grid
  metric: error
  smaller_is_better: true
  max_length:
    batches: {batches}
batches_per_step: 10
min_validation_period:
  batches: 100
"""


def det(master: str, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PEDL_MASTER": master}
    return subprocess.run([DET, *argv], env=env, capture_output=True, text=True, timeout=300)


def ok(master: str, *argv: str) -> str:
    result = det(master, *argv)
    assert result.returncode == 0, f"det {' '.join(argv)}: {result.stderr}"
    return result.stdout


def trials(master: str, exp_id: str) -> list[dict]:
    return sorted(json.loads(ok(master, "e", "lt", exp_id, "--json")), key=lambda t: t["id"])


def wait_until(check, what: str, timeout: float = 180) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_killed_trial_ends_canceled_and_the_experiment_completes_with_the_others(tmp_path: Path) -> None:
    config = tmp_path / "grid.yaml"
    config.write_text(GRID.format(batches=1000))
    model = write_tiny_model(tmp_path / "tiny")
    with local_cluster(tmp_path / "cluster", agents=1, slots=1) as cluster:
        master = cluster.master
        exp_id = ok(master, "e", "create", str(config), str(model)).split()[-1]
        wait_until(lambda: len(trials(master, exp_id)) == 3, "three trials")
        first, second, third = (t["id"] for t in trials(master, exp_id))
        # One slot: the third waits in the queue and ends at once; the first is killed while it runs.
        assert "Killed trial" in ok(master, "t", "kill", str(third))
        wait_until(lambda: trials(master, exp_id)[0]["agent_id"], "the first trial to run")
        killing = ok(master, "t", "kill", str(first))
        assert f"trial {first}" in killing
        wait_until(lambda: trials(master, exp_id)[0]["state"] == "CANCELED", "the first trial to end")
        assert json.loads(ok(master, "e", "describe", exp_id, "--json"))["experiment"]["state"] == "ACTIVE"

        waited = det(master, "e", "wait", exp_id)
        assert waited.returncode == 0 and "COMPLETED" in waited.stdout, waited.stdout + waited.stderr
        states = [t["state"] for t in trials(master, exp_id)]
        assert states == ["CANCELED", "COMPLETED", "CANCELED"], states
        assert trials(master, exp_id)[1]["total_batches"] == 1000 and second

        again = det(master, "t", "kill", str(first))
        assert again.returncode == 1 and "has already ended (CANCELED)" in again.stderr, again.stderr


def test_disabled_agents_and_slots_stay_disabled_across_a_scheduler_restart(tmp_path: Path) -> None:
    with local_cluster(tmp_path / "cluster", agents=1, slots=2, reconnect_grace=30) as cluster:
        master = cluster.master
        ok(master, "slot", "disable", "agent0", "1")
        ok(master, "agent", "disable", "agent0")
        cluster.kill_scheduler()
        cluster.start_scheduler()
        wait_for_agents(cluster, 1)
        (agent,) = json.loads(ok(master, "agent", "list", "--json"))
        assert agent["enabled"] is False
        ok(master, "agent", "enable", "agent0")  # its slot 1 stays disabled on its own
        slots = json.loads(ok(master, "slot", "list", "--json"))
        assert [s["enabled"] for s in slots] == [True, False]

        ok(master, "slot", "enable", "agent0", "1")
        cluster.kill_scheduler()
        cluster.start_scheduler()
        wait_for_agents(cluster, 1)
        assert json.loads(ok(master, "agent", "list", "--json"))[0]["enabled"] is True
        assert [s["enabled"] for s in json.loads(ok(master, "slot", "list", "--json"))] == [True, True]
