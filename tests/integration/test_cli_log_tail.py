"""`det trial logs ID --tail N [-f]` against a real scheduler: the scheduler cuts the tail (the CLI
receives about N lines, not the whole log), pedl's own lines hidden by default still leave N user lines,
and with -f the newest N lines come first, then every new one until the trial ends."""

from __future__ import annotations

import json
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pedl.cli import client as cli_client
from pedl.cli.main import main as cli
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from support import processes

pytestmark = pytest.mark.integration
DET = str(Path(sys.executable).parent / "det")
CONFIG = {
    "description": "tails",
    "entrypoint": "model_def:Trial",
    "searcher": {"name": "single", "metric": "error", "max_length": {"batches": 100}},
}
USER_LINES = 200


def _populate(db: Path) -> tuple[int, int, int]:
    """A COMPLETED trial whose log is USER_LINES user lines, each after three of pedl's own; and an
    ACTIVE trial with five user lines so far, which nothing runs (its experiment is stored as ended, so
    the scheduler recovers nothing): the test writes its new lines and its end."""
    s = open_storage(str(db))
    with s.transaction():
        exp_id = experiment_ops.create_experiment(
            s, config_yaml="description: tails\n", config_json=json.dumps(CONFIG), model_definition=b"m",
            model_definition_name="model", seed=1, created_at="2026-01-01T00:00:00Z", owner="admin",
            state="COMPLETED",
        )  # fmt: skip
        for request_id in ("quiet", "r0", "r1"):
            trial_ops.create_trial(s, exp_id, request_id, "{}", 1, "{}")
    running, done = (row["id"] for row in trial_ops.newest_trials(s, exp_id, 2))
    quiet = trial_ops.trial_id_of_request(s, exp_id, "quiet")
    assert quiet is not None
    with s.transaction():
        for i in range(USER_LINES):
            for k in range(3):
                result_ops.record_log(s, done, 1, "t", "pedl", f"pedl says {i}.{k}")
            result_ops.record_log(s, done, 1, "t", "stdout", f"user {i}")
        trial_ops.end_trial(s, done, "COMPLETED", "", "t")
        for k in range(3):  # a trial whose code printed nothing: only pedl's own lines
            result_ops.record_log(s, quiet, 1, "t", "pedl", f"pedl says {k}")
        trial_ops.end_trial(s, quiet, "COMPLETED", "", "t")
        for i in range(5):
            result_ops.record_log(s, running, 1, "t", "stdout", f"early {i}")
    s.close()
    return done, running, quiet


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, int, int, int]]:
    db = tmp_path / "pedl.db"
    done, running, quiet = _populate(db)
    password = secrets.token_hex(8)
    (tmp_path / "secret").write_text(secrets.token_hex(32))
    (tmp_path / "admin").write_text(password)
    service = processes.start("scheduler", [
        "pedl-scheduler", "--db", str(db), "--port", "0", "--port-file", str(tmp_path / "port"),
        "--cluster-secret-file", str(tmp_path / "secret"), "--admin-password-file", str(tmp_path / "admin"),
        "--checkpoint-store", "127.0.0.1:1",
    ], tmp_path, tmp_path / "port")  # fmt: skip
    try:
        token = processes.login(service.address, "admin", password)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PEDL_MASTER", service.address)
            mp.setenv("PEDL_TOKEN", token)
            yield db, done, running, quiet
    finally:
        processes.stop(service.process)


@pytest.fixture
def received(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many lines each GetTrialLogs stream brought to the CLI."""
    counts: list[int] = []
    real = cli_client.SchedulerClient.trial_logs

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN002, ANN003
        counts.append(0)
        for line in real(self, *args, **kwargs):
            counts[-1] += 1
            yield line

    monkeypatch.setattr(cli_client.SchedulerClient, "trial_logs", counted)
    return counts


def test_the_scheduler_cuts_the_tail(cluster, received, capsys: pytest.CaptureFixture[str]) -> None:
    _, done, _, _ = cluster
    assert cli(["trial", "logs", str(done), "--tail", "3", "--system"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "[pedl] pedl says 199.1",
        "[pedl] pedl says 199.2",
        "user 199",
    ]
    assert received == [3]  # not the log's 800 lines


def test_hidden_system_lines_still_leave_n_user_lines(
    cluster, received, capsys: pytest.CaptureFixture[str]
) -> None:
    _, done, _, _ = cluster
    assert cli(["trial", "logs", str(done), "--tail", "5"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"user {i}" for i in range(195, 200)]
    assert received == [5, 20]  # asked again for four times as many, never for the whole log
    assert cli(["trial", "logs", str(done), "--tail", "0"]) == 0
    assert capsys.readouterr().out == ""
    assert cli(["trial", "logs", str(done), "--tail", "1000", "--json"]) == 0
    shown = [json.loads(line)["message"] for line in capsys.readouterr().out.splitlines()]
    assert shown == [f"user {i}" for i in range(USER_LINES)]


def test_a_trial_with_only_pedls_lines_says_where_they_are(
    cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, _, quiet = cluster
    assert cli(["trial", "logs", str(quiet)]) == 0
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.strip() == f"trial {quiet} has logged only pedl's own lines (3); show them with --system"
    assert cli(["trial", "logs", str(quiet), "--system"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [f"[pedl] pedl says {k}" for k in range(3)] and out.err == ""


def _pump(process: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _next_lines(lines: queue.Queue, count: int, timeout: float = 60) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        try:
            got.append(lines.get(timeout=1))
        except queue.Empty:
            continue
    return got


def test_follow_prints_the_tail_then_every_new_line(cluster) -> None:
    db, _, running, _ = cluster
    follow = subprocess.Popen(
        [DET, "trial", "logs", str(running), "--tail", "2", "-f"],
        env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        lines = _pump(follow)
        assert _next_lines(lines, 2) == ["early 3", "early 4"]
        s = open_storage(str(db))
        try:
            with s.transaction():
                for i in range(3):
                    result_ops.record_log(s, running, 1, "t", "stdout", f"late {i}")
            assert _next_lines(lines, 3) == ["late 0", "late 1", "late 2"]
            with s.transaction():
                trial_ops.end_trial(s, running, "CANCELED", "", "t")
        finally:
            s.close()
        assert follow.wait(timeout=60) == 0, follow.stderr.read()  # type: ignore[union-attr]
        assert lines.empty()
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
