"""Shared by the seed conformance suites: one local cluster per module, driven through the CLI.

Each suite writes model definitions from the seed documents (/work/shared/spec) alone, runs them
with `pedl experiment create CONFIG DIR` and `pedl experiment wait ID`, reads the results with
`pedl experiment describe ID --json`, and runs each a second time with its trial killed mid-run.

The kill is a crash the model definition stages itself (as an out-of-memory kill would strike):
given `data.kill_at` and `data.kill_mark` (or `--kill-at`/`--kill-mark` for a script), the trial
process SIGKILLs itself when it trains batch `kill_at` and the mark file does not exist yet (it
writes the mark first), so the kill lands after the first checkpoint and before the trial ends,
with no race. The restarted trial must then finish with exactly the metrics of the run that was never killed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from support.processes import LocalCluster, local_cluster

BIN = Path(sys.executable).parent
KILL_AT = 7  # a batch of step 4 of 2-batch steps: after the checkpoint at batch 4, before the end

# A CPU trial of a few batches per step; a checkpoint every 2 steps; one restart allowed per kill.
BASE_CONFIG: dict[str, Any] = {
    "searcher": {
        "name": "single",
        "metric": "loss",
        "smaller_is_better": True,
        "max_length": {"batches": 12},
    },
    "batches_per_step": 2,
    "min_validation_period": {"batches": 4},
    "min_checkpoint_period": {"batches": 4},
    "reproducibility": {"experiment_seed": 11},
    "max_restarts": 2,
}


def config(**overrides: Any) -> dict[str, Any]:
    raw = json.loads(json.dumps(BASE_CONFIG))
    raw.update(overrides)
    return raw


def with_data_kill(raw_config: dict[str, Any], mark: str) -> dict[str, Any]:
    """The killed run's config for a Trial class: `data.kill_at` and `data.kill_mark`."""
    return {**raw_config, "data": {**(raw_config.get("data") or {}), "kill_at": KILL_AT, "kill_mark": mark}}


def with_script_kill(raw_config: dict[str, Any], mark: str) -> dict[str, Any]:
    """The killed run's config for a script: `--kill-at N --kill-mark PATH` after its arguments."""
    entrypoint = dict(raw_config["entrypoint"])
    entrypoint["args"] = [*entrypoint.get("args", []), "--kill-at", str(KILL_AT), "--kill-mark", mark]
    return {**raw_config, "entrypoint": entrypoint}


class Cli:
    """`pedl` commands as a user runs them, against one local cluster."""

    def __init__(self, cluster: LocalCluster, workdir: Path) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.env = {
            **os.environ,
            "PEDL_MASTER": cluster.scheduler.address,
            "PEDL_TOKEN": cluster.token,
            "PEDL_HOME": str(workdir / "home"),
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        }
        self._configs = 0

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(["pedl", *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def ok(self, *args: str, timeout: float = 600) -> str:
        done = self.run(*args, timeout=timeout)
        assert done.returncode == 0, f"pedl {args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def create(self, model_dir: Path, raw_config: dict[str, Any]) -> int:
        self._configs += 1
        path = self.workdir / f"config-{self._configs}.yaml"
        path.write_text(yaml.safe_dump(raw_config))
        out = self.ok("experiment", "create", str(path), str(model_dir))
        found = re.search(r"Created experiment (\d+)", out)
        assert found, out
        return int(found.group(1))

    def wait(self, exp_id: int) -> dict[str, Any]:
        self.run("experiment", "wait", str(exp_id))  # its exit status says COMPLETED or not
        return json.loads(self.ok("experiment", "describe", str(exp_id), "--json", "--metrics"))

    def logs(self, described: dict[str, Any]) -> str:
        return "\n".join(self.run("trial", "logs", str(t["id"])).stdout for t in described["trials"])


def cli_cluster(workdir: Path, slots: int = 2, tensorflow: bool = False) -> Iterator[Cli]:
    """A module's cluster (one agent) and its CLI; stopped by PID when the module ends."""
    # Kill marks live in a folder the agent shares with its sandboxed trials (--bind).
    (workdir / "marks").mkdir(parents=True, exist_ok=True)
    (workdir / "marks").chmod(0o777)  # a root agent runs trials as an unprivileged user (--trial-user)
    agent_args = ["--bind", str(workdir / "marks")]
    with local_cluster(
        workdir / "cluster", agents=1, slots=slots, agent_args=agent_args, preload_tensorflow=tensorflow
    ) as cluster:
        yield Cli(cluster, workdir)


def state(described: dict[str, Any]) -> str:
    return described["experiment"]["state"]


def histories(described: dict[str, Any]) -> dict[str, Any]:
    """Each trial's steps and validations (batches, metrics), keyed by its hyperparameters."""
    out = {}
    for detail in described["trials"]:
        hparams = json.dumps(detail.get("hparams", {}), sort_keys=True)
        steps = [(s.get("total_batches"), s.get("metrics")) for s in detail.get("steps", [])]
        validations = [(v.get("total_batches"), v.get("metrics")) for v in detail.get("validations", [])]
        out[hparams] = {"steps": steps, "validations": validations}
    return out


def restarts(described: dict[str, Any]) -> list[int]:
    return sorted(int(t.get("restarts", 0)) for t in described["trials"])


def completes_and_resumes_exactly(
    cli: Cli,
    model_dir: Path,
    raw_config: dict[str, Any],
    kill: Callable[[dict[str, Any], str], dict[str, Any]] = with_data_kill,
) -> dict[str, Any]:
    """Runs the model definition to COMPLETED, then again with every trial killed once at batch
    KILL_AT (`kill` makes that run's config); the second run's metrics must equal the first's."""
    reference = cli.wait(cli.create(model_dir, raw_config))
    assert state(reference) == "COMPLETED", cli.logs(reference)
    assert set(restarts(reference)) == {0}
    mark = str(cli.workdir / "marks" / f"kill-{model_dir.name}-{cli._configs}")
    killed = cli.wait(cli.create(model_dir, kill(raw_config, mark)))
    assert state(killed) == "COMPLETED", cli.logs(killed)
    assert set(restarts(killed)) == {1}, f"every trial is killed once: {restarts(killed)}\n{cli.logs(killed)}"
    assert histories(killed) == histories(reference)
    return reference
