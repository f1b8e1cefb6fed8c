"""The CLI exactly as the README tells a user to drive it, against real services."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import free_port, on_a_free_port

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


class User:
    """Runs `pedl`/`det` commands in a shell-like environment of their own."""

    def __init__(self, home: Path, master: str) -> None:
        self.env = {
            **os.environ,
            "PEDL_HOME": str(home),
            "PEDL_MASTER": master,
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        }

    def run(self, *args: str, timeout: float = 300, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(args), env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout, input=input
        )

    def ok(self, *args: str, timeout: float = 300) -> str:
        result = self.run(*args, timeout=timeout)
        assert result.returncode == 0, f"{args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        return result.stdout


def cluster_up(home: Path, *args: str) -> tuple[User, str]:
    """`pedl cluster up ARGS` on free ports, its user and what it printed; started again on new ports
    when another process took one between free_port() and the bind (up refuses it, or a service
    fails to bind and up shows its log)."""

    def up(port: int) -> tuple[User, str]:
        user = User(home, f"127.0.0.1:{port}")
        ports = ["--port", str(port), "--store-port", str(free_port()), "--webui-port", str(free_port())]
        result = user.run("pedl", "cluster", "up", *args, *ports)
        if result.returncode != 0:
            user.run("pedl", "cluster", "down")
            raise AssertionError(
                f"pedl cluster up exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return user, result.stdout

    return on_a_free_port(up)


@pytest.fixture
def user(tmp_path) -> Iterator[User]:
    u, _ = cluster_up(tmp_path / "home", "--agents", "1", "--slots-per-agent", "1")
    try:
        yield u
    finally:
        down = u.run("pedl", "cluster", "down")
        assert down.returncode == 0, down.stderr


def test_readme_quick_start(user: User, tmp_path) -> None:
    out = user.ok(
        "pedl",
        "experiment",
        "create",
        "examples/digits_pytorch/const.yaml",
        "examples/digits_pytorch",
        "--follow",
    )
    exp_id = re.search(r"Created experiment (\d+)", out).group(1)
    assert "validation_error" in out and "loss" in out and "COMPLETED" in out

    assert re.search(rf"^\s*{exp_id}\s+COMPLETED", user.ok("pedl", "experiment", "list"), re.M)
    described = user.ok("det", "experiment", "describe", exp_id)
    for expected in ("COMPLETED", "validation_error", "learning_rate", "hidden_size"):
        assert expected in described
    assert user.run("pedl", "experiment", "wait", exp_id).returncode == 0
    # Where the trial's slot time went, phase by phase, as the scheduler, agent and harness timed it.
    assert "Timeline" in user.ok("pedl", "trial", "describe", "1")
    timeline = json.loads(user.ok("pedl", "trial", "describe", "1", "--json"))["timeline"]
    names = [p["name"] for p in timeline]
    for phase in (
        "slot assigned",
        "model definition fetched and unpacked",
        "process spawned",
        "imports",
        "model definition loaded",
        "data loaders and model built",
        "train step",
        "validation",
        "checkpoint upload",
        "exit",
        "slot free",
    ):
        assert phase in names, f"{phase!r} not in the timeline {names}"
    assert names[0] == "slot assigned" and names[-1] == "slot free"
    assert all(p["end"] >= p["start"] for p in timeline)
    assert "agent-1" in user.ok("pedl", "agent", "list")
    # pedl's own lines only with --system (the default is the user's output alone).
    assert "started on agent" not in user.ok("pedl", "trial", "logs", "1")
    system = user.ok("pedl", "trial", "logs", "1", "--system")
    assert re.search(r"^\[pedl\] trial 1 run \d+ started on agent", system, re.M)

    model_dir = tmp_path / "downloaded"
    user.ok("pedl", "experiment", "download-model-def", exp_id, "-o", str(model_dir))
    for name in ("__init__.py", "model_def.py", "data.py"):
        assert (model_dir / name).read_bytes() == (ROOT / "examples/digits_pytorch" / name).read_bytes()


def test_bad_config_is_refused_naming_the_field_and_nothing_is_created(user: User, tmp_path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("searcher:\n  name: single\n  metric: validation_error\n  max_steps: ten\n")
    result = user.run("pedl", "experiment", "create", str(config), "examples/digits_pytorch")
    assert result.returncode != 0
    assert "line 4" in result.stderr and "searcher.max_steps" in result.stderr
    assert user.run("pedl", "experiment", "describe", "1").returncode != 0

    result = user.run(
        "pedl", "experiment", "create", "examples/digits_pytorch/const.yaml", str(tmp_path / "nope")
    )
    assert result.returncode != 0 and "nope" in result.stderr

    empty = tmp_path / "empty"
    empty.mkdir()
    result = user.run("pedl", "experiment", "create", "examples/digits_pytorch/const.yaml", str(empty))
    assert result.returncode != 0 and "empty" in result.stderr.lower()


def test_a_failing_trial_shows_the_users_traceback(user: User, tmp_path) -> None:
    model = tmp_path / "broken_model"
    shutil.copytree(ROOT / "examples/digits_pytorch", model)
    source = (model / "model_def.py").read_text()
    source = re.sub(
        r"(def build_model\(self[^\n]*:\n)",
        r"\1        raise RuntimeError('shape mismatch in layer 2')\n",
        source,
        count=1,
    )
    assert "shape mismatch" in source
    (model / "model_def.py").write_text(source)
    result = user.run(
        "pedl", "experiment", "create", "examples/digits_pytorch/const.yaml", str(model), "--follow"
    )
    assert result.returncode == 1
    logs = user.ok("pedl", "trial", "logs", "1")
    assert "RuntimeError: shape mismatch in layer 2" in logs and "model_def.py" in logs


def test_test_mode_and_local_mode_from_the_cli(user: User, tmp_path) -> None:
    out = user.ok(
        "pedl",
        "experiment",
        "create",
        "examples/digits_pytorch/const.yaml",
        "examples/digits_pytorch",
        "--test",
        "--follow",
    )
    assert "COMPLETED" in out
    exp_id = re.search(r"Created experiment (\d+)", out).group(1)
    assert "batches 2" in out or "2 batches" in out

    out = user.ok(
        "pedl",
        "experiment",
        "create",
        "examples/digits_pytorch/const.yaml",
        "examples/digits_pytorch",
        "--test",
        "--local",
    )
    assert "restored: validation metrics match" in out and "Experiment COMPLETED (local)" in out
    # Local runs never reach the cluster.
    assert re.findall(r"^\s*(\d+)\s", user.ok("pedl", "experiment", "list"), re.M) == [exp_id]


def test_large_files_left_out_by_detignore_are_not_uploaded(user: User, tmp_path) -> None:
    model = tmp_path / "digits"
    shutil.copytree(ROOT / "examples/digits_pytorch", model)
    (model / "data").mkdir()
    (model / "data" / "huge.bin").write_bytes(os.urandom(1024) * 100 * 1024)  # 100 MiB: over the limit
    (model / ".detignore").write_text("data/\n")
    out = user.ok(
        "pedl", "experiment", "create", "examples/digits_pytorch/const.yaml", str(model), "--test", "--follow"
    )
    exp_id = re.search(r"Created experiment (\d+)", out).group(1)
    downloaded = tmp_path / "back"
    user.ok("pedl", "experiment", "download-model-def", exp_id, "-o", str(downloaded))
    assert not (downloaded / "data").exists() and (downloaded / ".detignore").exists()

    (model / ".detignore").unlink()
    result = user.run("pedl", "experiment", "create", "examples/digits_pytorch/const.yaml", str(model))
    assert result.returncode == 2
    assert "data/huge.bin" in result.stderr and ".pedlignore" in result.stderr
