"""Which runs a fork server may start, and with what: the decisions, without processes."""

from __future__ import annotations

from pathlib import Path

from pedl_agent.config import parse_args
from pedl_agent.fork_server import server_argv, startup_difference
from pedl_agent.sandbox import Sandbox


def test_only_a_plain_python_dash_m_harness_has_a_fork_server() -> None:
    assert server_argv(["/venv/bin/python", "-m", "pedl.harness"], 7) == [
        "/venv/bin/python",
        "-m",
        "pedl.harness.zygote",
        "7",
    ]
    assert server_argv(["/opt/run-harness.sh"], 7) is None
    assert server_argv(["python", "-X", "dev", "-m", "pedl.harness"], 7) is None


def test_a_run_that_sets_variables_read_at_interpreter_start_is_spawned() -> None:
    server = {"PATH": "/bin", "HOME": "/w", "OMP_NUM_THREADS": "4"}
    # Per-run values that are read only when used, after the fork: still forked.
    same = {
        **server,
        "HOME": "/w/trials/1-1",
        "CUDA_VISIBLE_DEVICES": "0",
        "PEDL_TRIAL_ID": "1",
        "MY_FLAG": "x",
        "OMP_NUM_THREADS": "1",  # the forked harness applies it (torch.set_num_threads)
    }
    assert startup_difference(server, same) == []
    changed = {**server, "OMP_PROC_BIND": "true", "PYTHONPATH": "/extra", "LD_PRELOAD": "/x.so"}
    assert startup_difference(server, changed) == ["LD_PRELOAD", "OMP_PROC_BIND", "PYTHONPATH"]


def test_harness_start_is_fork_unless_told_to_spawn() -> None:
    assert parse_args(["--master", "h:1"]).harness_start == "fork"
    assert parse_args(["--master", "h:1", "--harness-start", "spawn"]).harness_start == "spawn"


def test_the_fork_servers_sandbox_sees_every_run_but_no_other_agent_state(tmp_path: Path) -> None:
    work, sock = tmp_path / "work", tmp_path / "sock"
    (work / "trials").mkdir(parents=True)
    sock.mkdir()
    sandbox = Sandbox("bwrap", hidden=(work, sock))
    argv = sandbox.wrap_fork_server(["python", "-m", "pedl.harness.zygote", "3"], work / "trials", sock)
    joined = " ".join(argv)
    assert " --ro-bind / / " not in joined and "--ro-bind /usr /usr" in joined  # an allow-list
    assert f"--bind {work / 'trials'} {work / 'trials'}" in joined and f"--bind {sock} {sock}" in joined
    assert f"--bind {work} " not in joined and f"--ro-bind {work} " not in joined  # no rest of it
    assert "--die-with-parent" in joined
    assert argv[-4:] == ["python", "-m", "pedl.harness.zygote", "3"]
    # Each child keeps only its own run: the server's view of every run is covered again.
    trial = work / "trials" / "4-1"
    plan = sandbox.child_plan(trial, sock / "4-1.sock", work / "trials")
    assert plan["covered"] == [str(work / "trials"), str(sock)]
    assert plan["trial_dir"] == str(trial) and (trial / ".tmp").is_dir()
