"""`pedl cluster up` with the real services: each one killed -9 comes back, an experiment still
completes, `cluster down` leaves no process behind, and down-then-up on the same ports works at once."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pedl import _grpc
from pedl.cli.main import main
from pedl.cluster import launcher, processes
from pedl.cluster.health import is_serving
from pedl.cluster.launcher import UpOptions, down
from pedl.cluster.paths import ClusterPaths
from pedl.cluster.state import ClusterRecord, load_state
from pedl.context import pack
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc
from support.models import tiny_config, write_tiny_model

pytestmark = pytest.mark.integration


def _state(home: Path) -> ClusterRecord:
    state = load_state(ClusterPaths(home).state_file)
    assert state is not None
    return state


def _processes_under(home: Path) -> list[int]:
    """Every process whose command line or working directory lies in the cluster's home."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(home) in cmdline or cwd.startswith(str(home)):
            found.append(int(entry.name))
    return found


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "pedl-home"
    monkeypatch.setenv("PEDL_HOME", str(home))  # the CLI's login from `cluster up` (auth.json)
    try:
        yield home
    finally:
        for pid in _processes_under(home):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _wait_for(what: str, predicate: Callable[[], bool], home: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            logs = {p.name: p.read_text(errors="replace")[-3000:] for p in (home / "cluster").glob("*.log")}
            raise AssertionError(f"timed out waiting for {what}: {logs}")
        time.sleep(0.2)


def _kill_and_wait_for_restart(home: Path, name: str) -> None:
    before = {s.name: s for s in _state(home).services}[name]
    os.kill(before.pid, signal.SIGKILL)

    def back() -> bool:
        svc = {s.name: s for s in _state(home).services}[name]
        if svc.pid == before.pid or not processes.is_ours(svc.pid, svc.argv):
            return False
        return not svc.address or is_serving(svc.address, timeout=1)

    _wait_for(f"{name} to be restarted", back, home)
    assert {s.name: s for s in _state(home).services}[name].restarts == before.restarts + 1


def _stub(master: str) -> scheduler_pb2_grpc.SchedulerServiceStub:
    return scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(master))


def _experiment(master: str, exp_id: int) -> scheduler_pb2.GetExperimentResponse:
    return _stub(master).GetExperiment(
        scheduler_pb2.GetExperimentRequest(experiment_id=exp_id), timeout=10, wait_for_ready=True
    )


def test_killed_services_come_back_an_experiment_completes_and_down_leaves_nothing(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = launcher.up(
        UpOptions(home=home, agents=1, port=0, store_port=0, webui_port=0), out=lambda _: None
    )
    for name in ("checkpoint-store", "scheduler"):
        _kill_and_wait_for_restart(home, name)

    packed = pack(write_tiny_model(tmp_path / "tiny"))
    config = tiny_config(max_batches=400, batches_per_step=10, validation_period=100)
    created = _stub(state.master).CreateExperiment(
        scheduler_pb2.CreateExperimentRequest(
            config_yaml=config, model_definition=packed.data, model_definition_name=packed.name
        ),
        timeout=60,
        wait_for_ready=True,
    )
    exp_id = created.experiment.id

    def trained() -> bool:
        trials = _experiment(state.master, exp_id).trials
        return bool(trials) and trials[0].num_steps >= 1

    _wait_for("the first step", trained, home)
    _kill_and_wait_for_restart(home, "agent-1")  # in mid-trial: its harness goes, the trial resumes

    terminal = {common_pb2.EXPERIMENT_STATE_COMPLETED, common_pb2.EXPERIMENT_STATE_ERROR}
    _wait_for("the experiment to end", lambda: _experiment(state.master, exp_id).experiment.state in terminal,
              home, timeout=300)  # fmt: skip
    result = _experiment(state.master, exp_id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
    assert result.trials[0].total_batches == 400

    capsys.readouterr()
    assert main(["cluster", "status", "--home", str(home)]) == 0
    restarts = {line.split()[0]: line.split()[4] for line in capsys.readouterr().out.splitlines()[2:]}
    assert restarts == {
        "supervisor": "0",
        "checkpoint-store": "1",
        "scheduler": "1",
        "webui": "0",
        "agent-1": "1",
    }

    ports = (
        int(state.master.rsplit(":", 1)[1]),
        int(state.checkpoint_store.rsplit(":", 1)[1]),
        int(state.webui.rstrip("/").rsplit(":", 1)[1]),
    )
    down(home, out=lambda _: None)
    _wait_for("every process to exit", lambda: not _processes_under(home), home, timeout=30)

    # Down, then up at once on the same ports (the old connections sit in TIME_WAIT), then down.
    ports_again = {"port": ports[0], "store_port": ports[1], "webui_port": ports[2]}
    options = UpOptions(home=home, agents=1, wait_warm=False, **ports_again)  # no trial runs on it
    again = launcher.up(options, out=lambda _: None)
    assert again.master == state.master and again.checkpoint_store == state.checkpoint_store
    down(home, out=lambda _: None)
    _wait_for("every process to exit", lambda: not _processes_under(home), home, timeout=30)
