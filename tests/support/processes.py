"""Starting pedl's real service processes for tests, and always stopping them by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent


@dataclass
class Service:
    name: str
    process: subprocess.Popen
    address: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def stop(process: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left of it."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


def start(
    name: str,
    args: list[str],
    workdir: Path,
    port_file: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> Service:
    """Starts `BIN/args[0] args[1:]` in its own process group; waits for its port file if given."""
    log_path = workdir / f"{name}.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [str(BIN / args[0]), *args[1:]],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    address = ""
    if port_file is not None:
        deadline = time.monotonic() + timeout
        while not port_file.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                stop(process)
                raise RuntimeError(f"{name} did not start:\n{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.05)
        address = f"127.0.0.1:{port_file.read_text().strip()}"
    return Service(name, process, address, log_path)


@dataclass
class LocalCluster:
    store: Service
    scheduler: Service
    agents: list[Service]
    workdir: Path

    @property
    def master(self) -> str:
        return self.scheduler.address

    def logs(self) -> str:
        return "\n".join(
            f"==== {s.name}\n{s.log()[-4000:]}" for s in [self.store, self.scheduler, *self.agents]
        )


@contextmanager
def local_cluster(workdir: Path, agents: int = 1, slots: int = 1) -> Iterator[LocalCluster]:
    """Checkpoint store, scheduler and agents as separate processes on 127.0.0.1 free ports."""
    workdir.mkdir(parents=True, exist_ok=True)
    started: list[Service] = []
    try:
        store = start(
            "checkpoint_store",
            [
                "pedl-checkpoint-store",
                "--port",
                "0",
                "--storage-path",
                str(workdir / "checkpoints"),
                "--port-file",
                str(workdir / "store.port"),
            ],
            workdir,
            workdir / "store.port",
        )
        started.append(store)
        scheduler = start(
            "scheduler",
            [
                "pedl-scheduler",
                "--port",
                "0",
                "--db",
                str(workdir / "pedl.db"),
                "--checkpoint-store",
                store.address,
                "--port-file",
                str(workdir / "scheduler.port"),
            ],
            workdir,
            workdir / "scheduler.port",
        )
        started.append(scheduler)
        agent_services = []
        for i in range(agents):
            agent = start(
                f"agent{i}",
                [
                    "pedl-agent",
                    "--master",
                    scheduler.address,
                    "--agent-id",
                    f"agent{i}",
                    "--slots",
                    str(slots),
                    "--work-dir",
                    str(workdir / f"agent{i}"),
                ],
                workdir,
            )
            started.append(agent)
            agent_services.append(agent)
        cluster = LocalCluster(store, scheduler, agent_services, workdir)
        wait_for_agents(cluster, agents)
        yield cluster
    finally:
        for service in reversed(started):
            stop(service.process)


def wait_for_agents(cluster: LocalCluster, count: int, timeout: float = 60) -> None:
    from pedl import _grpc
    from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc

    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(stub.ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=5).agents) >= count:
            return
        time.sleep(0.1)
    raise RuntimeError(f"agents did not register:\n{cluster.logs()}")
