"""Starting pedl's real service processes for tests, and always stopping them by PID."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

BIN = Path(sys.executable).parent
T = TypeVar("T")


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


def free_port() -> int:
    """A port free now; released at once, so another process may take it before the caller binds
    it: start servers through `on_a_free_port`, or on port 0 with a port file."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT_ATTEMPTS = 3
_PORT_TAKEN = ("already in use", "failed to bind to address", "eaddrinuse")


def port_taken(said: str) -> bool:
    """Whether a server's failure (its log, its error) says another process had its port."""
    return any(words in said.lower() for words in _PORT_TAKEN)


def on_a_free_port(start_on: Callable[[int], T], attempts: int = PORT_ATTEMPTS) -> T:
    """`start_on(free_port())`, called again with a new port while it fails because another process
    took the port between the pick and the bind (its exception's text says so: `port_taken`)."""
    for attempt in range(attempts):
        try:
            return start_on(free_port())
        except Exception as e:
            if attempt == attempts - 1 or not port_taken(str(e)):
                raise
    raise AssertionError("attempts must be at least 1")


@dataclass
class LocalCluster:
    store: Service
    scheduler: Service
    agents: list[Service]
    workdir: Path
    scheduler_args: list[str]
    # The admin's session token, which the test process presents (PEDL_TOKEN) while the cluster runs.
    token: str = ""
    tls: TlsFiles | None = None
    # Extra pedl-agent flags for every agent (e.g. ["--environment", "tf215=/path/to/python"]).
    agent_args: list[str] = field(default_factory=list)
    store_args: list[str] = field(default_factory=list)
    # Extra environment of the scheduler process only (e.g. PYTHONPATH to change its code in a test).
    scheduler_env: dict[str, str] = field(default_factory=dict)
    # Whether agents' fork servers import TensorFlow (~8 s of CPU each): only where trials use it.
    preload_tensorflow: bool = False

    @property
    def secret_file(self) -> Path:
        return self.workdir / "cluster-secret"

    @property
    def admin_password(self) -> str:
        return (self.workdir / "admin-password").read_text().strip()

    @property
    def master(self) -> str:
        return self.scheduler.address

    def logs(self) -> str:
        return "\n".join(
            f"==== {s.name}\n{s.log()[-4000:]}" for s in [self.store, self.scheduler, *self.agents]
        )

    def kill_scheduler(self) -> None:
        """SIGKILL, as a crash would: no clean-up runs."""
        os.kill(self.scheduler.process.pid, signal.SIGKILL)
        self.scheduler.process.wait(timeout=10)

    def kill_store(self) -> None:
        """SIGKILL the checkpoint store, as a crash would."""
        os.kill(self.store.process.pid, signal.SIGKILL)
        self.store.process.wait(timeout=10)

    def start_store(self) -> None:
        """Starts the checkpoint store again on its port and storage (harnesses reconnect to it)."""
        port = self.store.address.rpartition(":")[2]
        port_file = self.workdir / "store.port"
        port_file.unlink(missing_ok=True)
        args = list(self.store_args)
        args[args.index("--port") + 1] = port
        self.store = start("checkpoint_store", args, self.workdir, port_file)

    def start_scheduler(self) -> None:
        """Starts the scheduler on the same port and database (agents reconnect to it)."""
        port_file = self.workdir / "scheduler.port"
        port_file.unlink(missing_ok=True)
        self.scheduler = start("scheduler", self.scheduler_args, self.workdir, port_file, self.scheduler_env)

    def start_agent(self, index: int, slots: int = 1, extra_args: list[str] | None = None) -> Service:
        agent = start(
            f"agent{index}",
            [
                "pedl-agent",
                "--master",
                self.master,
                "--agent-id",
                f"agent{index}",
                "--slots",
                str(slots),
                "--work-dir",
                str(self.workdir / f"agent{index}"),
                "--cluster-secret-file",
                str(self.secret_file),
                *(["--tls-ca", str(self.tls.ca)] if self.tls else []),
                *([] if self.preload_tensorflow else ["--no-preload-tensorflow"]),
                *self.agent_args,
                *(extra_args or []),
            ],
            self.workdir,
        )
        self.agents.append(agent)
        return agent

    def stop_all(self) -> None:
        for service in [*reversed(self.agents), self.scheduler, self.store]:
            stop(service.process)


@dataclass(frozen=True)
class TlsFiles:
    """A CA and a server certificate for 127.0.0.1/localhost signed by it (support.tls makes them)."""

    ca: Path
    cert: Path
    key: Path

    def server_args(self) -> list[str]:
        return ["--tls-cert", str(self.cert), "--tls-key", str(self.key), "--tls-ca", str(self.ca)]


def _write_secret(path: Path) -> None:
    path.write_text(secrets.token_urlsafe(32) + "\n")
    path.chmod(0o600)


def login(master: str, username: str, password: str) -> str:
    from pedl import _grpc
    from pedl.v1 import auth_pb2, auth_pb2_grpc

    with _grpc.channel(master) as ch:
        request = auth_pb2.LoginRequest(username=username, password=password)
        return auth_pb2_grpc.AuthServiceStub(ch).Login(request, timeout=30).token


@contextmanager
def _env(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def local_cluster(
    workdir: Path,
    agents: int = 1,
    slots: int = 1,
    reconnect_grace: float = 3.0,
    tls: TlsFiles | None = None,
    agent_args: list[str] | None = None,
    scheduler_args: list[str] | None = None,
    store_args: list[str] | None = None,
    scheduler_env: dict[str, str] | None = None,
    preload_tensorflow: bool = False,
) -> Iterator[LocalCluster]:
    """Checkpoint store, scheduler and agents as separate processes on 127.0.0.1 free ports.

    Authentication is on as in production: a fresh cluster secret, an `admin` user whose token the
    test process presents while the cluster runs (PEDL_TOKEN), and with `tls` every channel on TLS.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    _write_secret(workdir / "cluster-secret")
    _write_secret(workdir / "admin-password")
    tls_args = tls.server_args() if tls else []
    extra_store_args = list(store_args or [])
    tls_env = {"PEDL_TLS_CA": str(tls.ca)} if tls else {}
    # The store is told the scheduler's port before the scheduler binds it, so another process may
    # take that port in between (free_port() releases it): then both start again on a new one.
    for attempt in range(PORT_ATTEMPTS):
        scheduler_port = free_port()
        full_store_args = [
            "pedl-checkpoint-store",
            "--port",
            "0",
            "--storage-path",
            str(workdir / "checkpoints"),
            "--port-file",
            str(workdir / "store.port"),
            "--cluster-secret-file",
            str(workdir / "cluster-secret"),
            "--master",
            f"127.0.0.1:{scheduler_port}",
            *tls_args,
            *extra_store_args,
        ]
        (workdir / "store.port").unlink(missing_ok=True)
        store = start("checkpoint_store", full_store_args, workdir, workdir / "store.port")
        cluster = LocalCluster(
            store,
            store,
            [],
            workdir,
            [],
            tls=tls,
            agent_args=list(agent_args or []),
            store_args=full_store_args,
            scheduler_env=dict(scheduler_env or {}),
            preload_tensorflow=preload_tensorflow,
        )
        cluster.scheduler_args = [
            "pedl-scheduler",
            "--cluster-secret-file",
            str(workdir / "cluster-secret"),
            "--admin-password-file",
            str(workdir / "admin-password"),
            *tls_args,
            "--port",
            str(scheduler_port),
            "--db",
            str(workdir / "pedl.db"),
            "--checkpoint-store",
            store.address,
            "--port-file",
            str(workdir / "scheduler.port"),
            "--allowed-storage-root",
            str(workdir / "checkpoints"),
            "--agent-reconnect-grace",
            str(reconnect_grace),
            "--heartbeat-interval",
            "1",
            "--heartbeat-timeout",
            "10",
            # Restarts back off as in production, only shorter, so that tests of failing trials stay quick.
            "--restart-backoff",
            "0.2",
            "--restart-backoff-max",
            "2",
            *(scheduler_args or []),
        ]
        try:
            cluster.start_scheduler()
            break
        except BaseException as e:
            stop(store.process)
            if not port_taken(str(e)) or attempt == PORT_ATTEMPTS - 1:
                raise
    try:
        with _env(**tls_env):
            cluster.token = login(cluster.master, "admin", cluster.admin_password)
            with _env(PEDL_TOKEN=cluster.token):
                for i in range(agents):
                    cluster.start_agent(i, slots)
                wait_for_agents(cluster, agents)
                yield cluster
    finally:
        cluster.stop_all()


def wait_for_agents(cluster: LocalCluster, count: int, timeout: float = 60) -> None:
    import grpc

    from pedl import _grpc
    from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc

    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if len(stub.ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=5).agents) >= count:
                return
        except grpc.RpcError as e:  # a loaded scheduler slow to answer: ask again until the deadline
            if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
        time.sleep(0.1)
    raise RuntimeError(f"agents did not register:\n{cluster.logs()}")
