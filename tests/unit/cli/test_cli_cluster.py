"""`cluster up` / `down` with stand-in service processes; every process is killed by PID at the end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pedl.cli.main import main
from pedl.cluster import launcher, processes, supervisor
from pedl.cluster.launcher import ClusterError, UpOptions
from pedl.cluster.paths import ClusterPaths, harness_warm_file, pedl_home
from pedl.cluster.state import ClusterRecord, ServiceRecord, load_state, save_state

FAKE = str(Path(__file__).with_name("fake_service.py"))


def fake_command(**overrides: str) -> Callable[[str], list[str]]:
    return lambda kind: [sys.executable, FAKE, overrides.get(kind, kind)]


@pytest.fixture
def reap() -> Iterator[list[int]]:
    """PIDs to SIGKILL at the end, whatever happened."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _recorded_pids(home: Path) -> list[int]:
    state = load_state(ClusterPaths(home).state_file)
    return [s.pid for s in state.services] + [state.supervisor_pid] if state else []


def test_home_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert pedl_home(tmp_path) == tmp_path
    monkeypatch.setenv("PEDL_HOME", str(tmp_path / "env"))
    assert pedl_home(None) == tmp_path / "env"
    monkeypatch.delenv("PEDL_HOME")
    assert pedl_home(None) == Path.home() / ".pedl"


def test_down_without_a_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "down", "--home", str(tmp_path)]) == 0
    assert "No pedl cluster is recorded" in capsys.readouterr().out


def test_service_command_prefers_the_venv_script() -> None:
    argv = processes.service_command("pedl-scheduler", "pedl_scheduler.main")
    script = Path(sys.executable).parent / "pedl-scheduler"
    assert argv == ([str(script)] if script.exists() else [sys.executable, "-c", argv[2]])
    assert (
        processes.service_command("no-such-script", "x.main")[-1]
        == "import sys; from x.main import main; sys.exit(main())"
    )


def wait_for_exec(pid: int, argv: list[str]) -> None:
    """A freshly forked child shows its parent's command line until it has exec'd."""
    deadline = time.monotonic() + 60
    while not processes.is_ours(pid, argv) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_is_ours_rejects_a_pid_running_something_else(reap: list[int], tmp_path: Path) -> None:
    argv = [sys.executable, FAKE, "hang-agent", "--work-dir", str(tmp_path)]
    proc = processes.spawn(argv, tmp_path / "x.log", cwd=tmp_path)
    reap.append(proc.pid)
    wait_for_exec(proc.pid, argv)
    assert processes.is_ours(proc.pid, argv)
    assert not processes.is_ours(proc.pid, [sys.executable, FAKE, "hang-agent", "--work-dir", "/elsewhere"])
    assert not processes.is_ours(os.getpid(), argv)
    processes.stop_child(proc)
    assert not processes.is_ours(proc.pid, argv)


def test_down_stops_recorded_processes_and_spares_strangers(
    reap: list[int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = ClusterPaths(tmp_path)
    paths.root.mkdir(parents=True)
    argv = [sys.executable, FAKE, "agent", "--work-dir", str(tmp_path)]
    proc = processes.spawn(argv, paths.log("agent-1"), cwd=tmp_path)
    reap.append(proc.pid)
    wait_for_exec(proc.pid, argv)
    stranger = ServiceRecord(name="scheduler", pid=os.getpid(), argv=["pedl-scheduler", "--db", "x"], log="")
    save_state(
        paths.state_file,
        ClusterRecord(home=str(tmp_path), services=[stranger, ServiceRecord("agent-1", proc.pid, argv, "")]),
    )
    assert main(["cluster", "down", "--home", str(tmp_path)]) == 0
    proc.wait(10)  # it exited on SIGTERM; reap the zombie
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"agent-1 (pid {proc.pid}) stopped"
    assert out[1] == f"scheduler (pid {os.getpid()}) was not running"
    assert not paths.state_file.exists()
    assert main(["cluster", "down", "--home", str(tmp_path)]) == 0  # idempotent


def test_up_and_down_with_stand_in_services(
    reap: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(processes, "service_command", lambda script, module: [sys.executable, FAKE, script])
    home = str(tmp_path)
    try:
        code = main(
            [
                "cluster",
                "up",
                "--home",
                home,
                "--agents",
                "2",
                "--port",
                "0",
                "--store-port",
                "0",
                "--webui-port",
                "0",
                "--metrics-port",
                "0",
                "--allowed-s3-bucket",
                "team-ckpts",
                "--allowed-s3-endpoint",
                "http://127.0.0.1:9000",
            ]
        )
    finally:
        reap.extend(_recorded_pids(tmp_path))
    out = capsys.readouterr().out
    assert code == 0, out
    state = load_state(ClusterPaths(tmp_path).state_file)
    assert state is not None
    assert [s.name for s in state.services] == [
        "checkpoint-store",
        "scheduler",
        "agent-1",
        "agent-2",
        "webui",
    ]
    assert f"export PEDL_MASTER={state.master}" in out
    argv = {s.name: " ".join(s.argv) for s in state.services}
    assert "--metrics-port 0" in argv["scheduler"]
    # A local cluster shares its user's disk: each agent bounds what one trial run may write.
    assert all("--trial-disk-limit 20G" in argv[f"agent-{i}"] for i in (1, 2))
    for name in ("scheduler", "checkpoint-store"):
        assert "--allowed-s3-bucket team-ckpts --allowed-s3-endpoint http://127.0.0.1:9000" in argv[name]
    assert all(processes.is_ours(s.pid, s.argv) for s in state.services)
    assert (tmp_path / "cluster" / "agents" / "agent-2").is_dir()

    # A second `up` in the same home refuses and names the running master.
    assert (
        main(["cluster", "up", "--home", home, "--port", "0", "--store-port", "0", "--webui-port", "0"]) == 1
    )
    err = capsys.readouterr().err
    assert "still running" in err and state.master in err

    assert main(["cluster", "down", "--home", home]) == 0
    out = capsys.readouterr().out
    assert out.index("agent-1") < out.index("scheduler") < out.index("checkpoint-store")
    assert not any(processes.is_ours(s.pid, s.argv) for s in state.services)


def test_up_returns_once_the_agents_trials_start_warm(reap: list[int], tmp_path: Path) -> None:
    """A cluster's first trials do not wait on the agents' fork servers importing torch: `up` does."""
    said: list[str] = []
    options = UpOptions(home=tmp_path, port=0, store_port=0, webui_port=0, agents=2,
                        command=fake_command(agent="late-agent"))  # fmt: skip
    try:
        launcher.up(options, out=said.append)
    finally:
        reap.extend(_recorded_pids(tmp_path))
    agents = ClusterPaths(tmp_path).agents
    assert all(harness_warm_file(agents / f"agent-{i}").exists() for i in (1, 2))
    assert any("import the frameworks" in line for line in said)
    assert launcher.down(tmp_path, out=lambda _: None) == 5  # the services (the supervisor aside)


def test_up_does_not_fail_on_agents_still_importing(reap: list[int], tmp_path: Path) -> None:
    said: list[str] = []
    options = UpOptions(home=tmp_path, port=0, store_port=0, webui_port=0, timeout_seconds=1,
                        command=fake_command(agent="cold-agent"))  # fmt: skip
    try:
        state = launcher.up(options, out=said.append)
    finally:
        reap.extend(_recorded_pids(tmp_path))
    assert "agent-1: still importing after 1 s; the first trials wait" in said
    assert "agent-1" in [s.name for s in state.services]
    launcher.down(tmp_path, out=lambda _: None)


def test_up_reports_a_dying_service_with_its_log(reap: list[int], tmp_path: Path) -> None:
    options = UpOptions(
        home=tmp_path, port=0, store_port=0, webui_port=0, command=fake_command(scheduler="fail")
    )
    with pytest.raises(ClusterError) as exc:
        try:
            launcher.up(options, out=lambda _: None)
        finally:
            reap.extend(_recorded_pids(tmp_path))
    message = str(exc.value)
    assert message.startswith("scheduler exited with code 3 while starting")
    assert "fake service: configuration is broken" in message
    assert not ClusterPaths(tmp_path).state_file.exists()


def test_up_gives_up_on_a_service_that_never_serves(reap: list[int], tmp_path: Path) -> None:
    pids: list[int] = []
    real_spawn = processes.spawn

    def spawn(argv: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
        proc = real_spawn(argv, log, cwd)
        pids.append(proc.pid)
        reap.append(proc.pid)
        return proc

    options = UpOptions(home=tmp_path, port=0, store_port=0, webui_port=0, timeout_seconds=1,
                        command=fake_command(**{"checkpoint-store": "hang"}))  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(processes, "spawn", spawn)
        with pytest.raises(ClusterError, match="checkpoint-store did not come up within 1 s"):
            launcher.up(options, out=lambda _: None)
    assert len(pids) == 1
    with pytest.raises(ProcessLookupError):  # stopped and reaped
        os.kill(pids[0], 0)


def test_up_refuses_a_busy_port(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(
            ClusterError, match=f"port {port} on 127.0.0.1 is already in use; pick another with --port"
        ):
            launcher.up(UpOptions(home=tmp_path, port=port, store_port=0, webui_port=0), out=lambda _: None)


def test_restart_backoff_doubles_and_is_capped() -> None:
    backoff = supervisor.Backoff(first_seconds=1, max_seconds=30)
    assert [backoff.delay(n) for n in (1, 2, 3, 4, 5, 6, 7)] == [1, 2, 4, 8, 16, 30, 30]


def test_the_free_port_check_treats_time_wait_as_free(tmp_path: Path) -> None:
    """`cluster down && cluster up` at once: the old server's connections sit in TIME_WAIT."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        conn.close()  # the server side closes first: its end goes to TIME_WAIT
        client.recv(1)
        client.close()
    launcher._check_port_free(port, "--port")  # no ClusterError


def _wait_for(predicate: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_killed_service_is_restarted_and_down_stops_the_new_one(
    reap: list[int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = UpOptions(home=tmp_path, agents=1, port=0, store_port=0, webui_port=0, command=fake_command())
    try:
        launcher.up(options, out=lambda _: None)
    finally:
        reap.extend(_recorded_pids(tmp_path))
    paths = ClusterPaths(tmp_path)
    first = load_state(paths.state_file)
    assert first is not None and processes.is_ours(first.supervisor_pid, first.supervisor_argv)
    old = {s.name: s.pid for s in first.services}
    for name in ("agent-1", "scheduler"):
        os.kill(old[name], signal.SIGKILL)

    def restarted() -> bool:
        state = load_state(paths.state_file)
        assert state is not None
        return all(s.restarts == 1 and s.pid != old[s.name] for s in state.services if s.name in old and
                   s.name in ("agent-1", "scheduler"))  # fmt: skip

    _wait_for(restarted)
    now = load_state(paths.state_file)
    assert now is not None
    reap.extend(_recorded_pids(tmp_path))
    assert all(processes.is_ours(s.pid, s.argv) for s in now.services)

    capsys.readouterr()
    assert main(["cluster", "status", "--home", str(tmp_path)]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:]}
    assert set(rows) == {"supervisor", "checkpoint-store", "scheduler", "webui", "agent-1"}
    agent_pid = next(s.pid for s in now.services if s.name == "agent-1")
    assert rows["agent-1"][1] == str(agent_pid) and rows["agent-1"][2] == "running"
    assert rows["scheduler"][-2] == "1" and rows["checkpoint-store"][-2] == "0"

    assert main(["cluster", "down", "--home", str(tmp_path)]) == 0
    for pid, argv in [(now.supervisor_pid, now.supervisor_argv), *((s.pid, s.argv) for s in now.services)]:
        assert not processes.is_ours(pid, argv)
    assert main(["cluster", "status", "--home", str(tmp_path)]) == 1


def test_status_names_a_service_that_is_down(reap: list[int], tmp_path: Path, capsys) -> None:
    paths = ClusterPaths(tmp_path)
    save_state(paths.state_file, ClusterRecord(
        home=str(tmp_path), services=[ServiceRecord("agent-1", 2**22 + 7, ["pedl-agent", "--x"], "")]
    ))  # fmt: skip
    assert main(["cluster", "status", "--home", str(tmp_path)]) == 1
    assert "agent-1" in capsys.readouterr().out.splitlines()[2].split()[0]


def test_up_refuses_a_bad_metrics_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["cluster", "up", "--home", str(tmp_path), "--metrics-port", "-2"])
    assert "or -1 (none), got '-2'" in capsys.readouterr().err
