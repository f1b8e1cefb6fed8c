"""On a real cluster: an experiment an older pedl ended ERROR through a store outage is revived by
`det e activate` after the upgrade (a restarted scheduler) and completes; one its own code ended is
refused with one line saying why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import update
from test_cluster import submit, wait

from pedl.v1 import common_pb2
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.tables import trials
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster, wait_for_agents

pytestmark = pytest.mark.integration
PEDL = str(Path(sys.executable).parent / "pedl")
DET = str(Path(sys.executable).parent / "det")
CACHE = Path(__file__).resolve().parents[2] / ".cache"

# What an older pedl recorded for a trial whose restarts a store outage used up.
STORE_DOWN = (
    "pedl.harness.store_client.StoreUnavailable: checkpoint store at 127.0.0.1:9 unreachable "
    "(Connection refused) (after 0 restarts, max_restarts is 0)"
)


def cli(program: str, master: str, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PEDL_MASTER": master}
    return subprocess.run([program, *argv], env=env, capture_output=True, text=True, timeout=120)


def test_activate_revives_an_experiment_an_outage_ended_and_refuses_one_its_code_ended(tmp_path) -> None:
    # Outside /tmp, which the harness's sandbox replaces with its own.
    flag = CACHE / f"revive-outage-{os.getpid()}"
    flag.parent.mkdir(parents=True, exist_ok=True)
    flag.write_text("the model fails while this file exists")
    try:
        run_scenario(tmp_path, flag)
    finally:
        flag.unlink(missing_ok=True)


def run_scenario(tmp_path: Path, flag: Path) -> None:
    # Fails at its first batch while the flag exists: under the old pedl, the outage; later, nothing.
    fails = f'__import__("os").path.exists({str(flag)!r})'
    body = f'(setattr(type(self), "losses", lambda s, p, l: 1 / 0) if {fails} else None)'
    model = write_tiny_model(tmp_path / "model", build_model_body=body)
    # The agent shares the flag's folder with its sandboxed trials, which see only an allow-list.
    with local_cluster(tmp_path / "cluster", agent_args=["--bind", str(flag.parent)]) as cluster:
        outage = submit(cluster, model, tiny_config(extra="max_restarts: 0\n"))
        own_bug = submit(cluster, model, tiny_config(extra="max_restarts: 0\n"))
        for exp_id in (outage, own_bug):
            assert wait(cluster, exp_id, timeout=180).experiment.state == common_pb2.EXPERIMENT_STATE_ERROR

        # The older pedl's rows: the outage's trial ended ERROR with the store's error and no cause.
        cluster.kill_scheduler()
        db = open_storage(str(cluster.workdir / "pedl.db"))
        with db.transaction():
            db.defer(
                update(trials).where(trials.c.experiment_id == outage).values(end_cause="", error=STORE_DOWN),
                {},
            )
        db.close()
        cluster.start_scheduler()
        wait_for_agents(cluster, 1)
        flag.unlink()  # the outage is over

        revived = cli(DET, cluster.master, "e", "activate", str(outage))
        assert revived.returncode == 0, revived.stderr
        result = wait(cluster, outage, timeout=180)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        (trial,) = result.trials
        assert trial.total_batches == 40 and trial.error == ""

        refused = cli(PEDL, cluster.master, "experiment", "activate", str(own_bug))
        assert refused.returncode != 0
        message = refused.stderr.strip()
        assert len(message.splitlines()) == 1, message
        assert "own code" in message and "ZeroDivisionError" in message, message
        assert wait(cluster, own_bug).experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
