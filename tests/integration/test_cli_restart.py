"""`det e create --follow`, `det t logs -f` and `det e wait` ride out a scheduler killed with
SIGKILL and restarted on the same database and port: they finish with the experiment."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration
DET = str(Path(sys.executable).parent / "det")


def _lines(process: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_for(lines: queue.Queue, text: str, seen: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"{text!r} never printed:\n{''.join(seen)}")


def test_follow_logs_and_wait_survive_a_scheduler_restart(tmp_path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        tiny_config(
            max_batches=400,
            batches_per_step=10,
            validation_period=100,
            extra="min_checkpoint_period:\n  batches: 50\n",
        )
    )
    model = write_tiny_model(tmp_path / "tiny")
    with local_cluster(tmp_path / "cluster", agents=1, reconnect_grace=30) as cluster:
        env = {**os.environ, "PEDL_MASTER": cluster.master}
        follow = subprocess.Popen(
            [DET, "e", "create", str(config), str(model), "-f"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        watchers: list[subprocess.Popen] = []
        try:
            lines, seen = _lines(follow), []
            _wait_for(lines, "step 2:", seen)
            watchers = [
                subprocess.Popen(
                    [DET, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
                for argv in (["t", "logs", "1", "-f"], ["e", "wait", "1"])
            ]
            time.sleep(1)
            cluster.kill_scheduler()
            time.sleep(2)
            cluster.start_scheduler()
            assert follow.wait(timeout=300) == 0, "".join(seen) + follow.stdout.read() + follow.stderr.read()
            _wait_for(lines, "COMPLETED", seen, timeout=60)
            logs_out, logs_err = watchers[0].communicate(timeout=60)
            assert watchers[0].returncode == 0, logs_err
            wait_out, wait_err = watchers[1].communicate(timeout=60)
            assert watchers[1].returncode == 0 and "COMPLETED" in wait_out, wait_out + wait_err
        finally:
            for process in (follow, *watchers):
                if process.poll() is None:
                    process.kill()
                    process.wait()
