"""What the TensorFlowTrial and EstimatorTrial conformance tests share: a real local cluster driven
through the `pedl` CLI, and the check that a trial killed mid-run resumes exactly.

Each test module starts one cluster (`cli_cluster`) and runs every model definition on it twice:
once uninterrupted, once with its harness process SIGKILLed after the first checkpoint. Both must
COMPLETE, and the resumed run's step and validation metrics must equal the uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pedl import _grpc
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from support.processes import LocalCluster, local_cluster

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TERMINAL = {"COMPLETED", "ERROR", "CANCELED"}


@dataclass
class CliCluster:
    cluster: LocalCluster
    workdir: Path

    def pedl(self, *args: str, timeout: float = 300) -> str:
        env = {
            **os.environ,
            "PEDL_MASTER": self.cluster.master,
            "PEDL_TOKEN": self.cluster.token,
            "PEDL_HOME": str(self.workdir / "home"),
        }
        done = subprocess.run(
            [str(BIN / "pedl"), *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
        command = " ".join(args)
        assert done.returncode == 0, f"pedl {command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def create(self, config: dict[str, Any], model: Path) -> int:
        """`pedl experiment create` (returns at once, so that the trial can be killed while it runs)."""
        path = self.workdir / f"config-{time.monotonic_ns()}.yaml"
        path.write_text(yaml.safe_dump(config))
        out = self.pedl("experiment", "create", str(path), str(model))
        return int(re.search(r"Created experiment (\d+)", out).group(1))

    def describe(self, exp_id: int) -> dict[str, Any]:
        return json.loads(self.pedl("experiment", "describe", str(exp_id), "--json", "--metrics"))

    def wait(self, exp_id: int, timeout: float = 600) -> dict[str, Any]:
        self.pedl("experiment", "wait", str(exp_id), timeout=timeout)
        return self.describe(exp_id)

    def trial(self, exp_id: int) -> scheduler_pb2.GetTrialResponse:
        """The experiment's one trial, over gRPC (polled fast enough to catch a trial mid-run)."""
        with _grpc.channel(self.cluster.master) as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            (trial,) = stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
            return stub.GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))

    def kill_trial_after_first_checkpoint(self, exp_id: int, timeout: float = 300) -> int:
        """SIGKILLs the trial's harness once it has a checkpoint; returns the batches trained then."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            detail = self.trial(exp_id)
            if detail.checkpoints:
                pids = harness_pids([a.process.pid for a in self.cluster.agents])
                assert pids, f"experiment {exp_id}: no harness process running after its first checkpoint"
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                return max(s.total_batches for s in detail.steps)
            time.sleep(0.05)
        raise AssertionError(f"experiment {exp_id} wrote no checkpoint in {timeout}s:\n{self.cluster.logs()}")


def harness_pids(roots: list[int]) -> list[int]:
    """The harness processes under the given (agent) processes: spawned ones run `python -m
    pedl.harness`; forked ones are children of a fork server (`python -m pedl.harness.zygote`), whose
    command line they keep."""
    parents: dict[int, int] = {}
    cmdlines: dict[int, list[bytes]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdlines[int(stat.parent.name)] = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])

    def zygote(pid: int) -> bool:
        return b"pedl.harness.zygote" in cmdlines.get(pid, [])

    found = []
    for pid in parents:
        ancestor = parents.get(pid)
        while ancestor and ancestor not in roots:
            ancestor = parents.get(ancestor)
        if not ancestor:
            continue
        if b"pedl.harness" in cmdlines.get(pid, []) or (zygote(pid) and zygote(parents.get(pid, 0))):
            found.append(pid)
    return found


def history(described: dict[str, Any]) -> dict[str, list]:
    """The trial's step and validation metrics by batch count, from `describe --json`."""
    (trial,) = described["trials"]
    return {
        kind: [(int(r["total_batches"]), r.get("metrics", {})) for r in trial.get(kind, [])]
        for kind in ("steps", "validations")
    }


def state(described: dict[str, Any]) -> str:
    return described["experiment"]["state"].removeprefix("EXPERIMENT_STATE_")


def restarts(described: dict[str, Any]) -> int:
    return int(described["trials"][0].get("restarts", 0))


@contextmanager
def cli_cluster(workdir: Path, agent_args: list[str] | None = None) -> Iterator[CliCluster]:
    with local_cluster(workdir / "cluster", agent_args=agent_args, preload_tensorflow=True) as cluster:
        yield CliCluster(cluster, workdir)


def completes_and_resumes_exactly(cli: CliCluster, model: Path, config: dict[str, Any]) -> dict[str, Any]:
    """Runs `model` uninterrupted, then again killed after its first checkpoint: both COMPLETE with
    equal metrics. Returns the uninterrupted run's `describe --json`."""
    config = {**config, "reproducibility": {"experiment_seed": 7}, "max_restarts": 1}
    reference = cli.wait(cli.create(config, model))
    assert state(reference) == "COMPLETED", cli.cluster.logs()
    exp_id = cli.create(config, model)
    killed_at = cli.kill_trial_after_first_checkpoint(exp_id)
    resumed = cli.wait(exp_id)
    assert state(resumed) == "COMPLETED", cli.cluster.logs()
    total = reference["trials"][0].get("total_batches")
    assert restarts(resumed) == 1, f"killed at {killed_at} batches of {total}, yet the trial never restarted"
    assert history(resumed) == history(reference), (history(resumed), history(reference))
    return reference
