"""KerasTrialController on 2 worker processes (MultiWorkerMirroredStrategy over the harness's
rendezvous, no agent): the ranks agree, only the chief writes, and a restore continues exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support.processes import on_a_free_port

WORKER = Path(__file__).parent / "keras_worker_main.py"


def run_workers(kind: str, out: Path, restore: Path | None = None) -> list[dict[str, Any]]:
    """Both ranks to completion, on a new rendezvous port should another process take the picked one
    before rank 0 binds it."""
    return on_a_free_port(lambda port: _run_workers_on(port, kind, out, restore))


def _run_workers_on(port: int, kind: str, out: Path, restore: Path | None) -> list[dict[str, Any]]:
    """Both ranks on `port`; killed by PID (with their process groups) whatever happens, the others
    at once when one fails (its log is raised)."""
    out.mkdir(parents=True, exist_ok=True)
    procs = []
    try:
        for rank in (0, 1):
            argv = [sys.executable, str(WORKER), str(rank), str(port), kind, str(out)]
            if restore is not None:
                argv.append(str(restore))
            log = open(out / f"rank{rank}.log", "wb")  # closed below, with the process
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            procs.append((proc, log))
        deadline = time.monotonic() + 240
        while None in (codes := [proc.poll() for proc, _ in procs]):
            failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
            assert not failed, (out / f"rank{failed[0]}.log").read_text()[-4000:]
            assert time.monotonic() < deadline, "the workers did not finish within 240 s"
            time.sleep(0.2)
    finally:
        for proc, log in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
    for rank, (proc, _) in enumerate(procs):
        assert proc.returncode == 0, (out / f"rank{rank}.log").read_text()[-4000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]


@pytest.mark.parametrize("kind", ["dataset", "generator", "started"])
def test_two_workers_agree_and_a_restore_continues_exactly(tmp_path: Path, kind: str) -> None:
    chief, other = run_workers(kind, tmp_path / "first")
    workers = chief["tf_config"]["cluster"]["worker"]
    assert len(set(workers)) == 2 and other["tf_config"]["cluster"]["worker"] == workers
    assert [chief["tf_config"]["task"]["index"], other["tf_config"]["task"]["index"]] == [0, 1]
    # Metrics are reduced over both workers, so both report the same; inputs count both workers'
    # (10 batches of at most 8 each).
    for key in ("step10", "validation10", "step20", "validation20"):
        names = {"val_loss", "val_accuracy"} if key.startswith("validation") else {"loss", "accuracy"}
        assert chief[key] == other[key] and names <= set(chief[key]), key
    assert chief["inputs10"] == other["inputs10"] > 10 * 8
    assert "model.weights.h5" in chief["wrote"] and other["wrote"] == []

    resumed, resumed_other = run_workers(kind, tmp_path / "resumed", restore=tmp_path / "first" / "ckpt0")
    for key in ("step20", "validation20"):
        assert resumed[key] == resumed_other[key] == chief[key], key
