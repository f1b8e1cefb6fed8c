"""`pedl cluster up` / `down`: a checkpoint store, a scheduler and N agents on 127.0.0.1."""

from __future__ import annotations

import errno
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from pedl import _timeutil
from pedl.cluster import credentials, health, processes, supervisor
from pedl.cluster.paths import DEFAULT_TRIAL_DISK_LIMIT, ClusterPaths, harness_warm_file, pedl_home
from pedl.cluster.state import ClusterRecord, ServiceRecord, StateError, load_state, save_state

HOST = "127.0.0.1"
STORE, SCHEDULER, WEBUI = "checkpoint-store", "scheduler", "webui"
_COMMANDS = {
    STORE: ("pedl-checkpoint-store", "pedl_checkpoint_store.main"),
    SCHEDULER: ("pedl-scheduler", "pedl_scheduler.main"),
    "agent": ("pedl-agent", "pedl_agent.main"),
    WEBUI: ("pedl-webui", "pedl_webui.main"),
}

Output = Callable[[str], None]


class ClusterError(Exception):
    pass


@dataclass(frozen=True)
class UpOptions:
    home: Path
    agents: int = 1
    slots_per_agent: int = 1
    port: int = 8080
    store_port: int = 8090
    webui_port: int = 8100
    # The scheduler's Prometheus port (0: a free one, -1: none; -2: 9464, skipped with a warning when
    # taken, so a second cluster need not clash).
    metrics_port: int = -2
    # S3 buckets and endpoints experiments' checkpoint_storage may name (both services check them).
    allowed_s3_buckets: tuple[str, ...] = ()
    allowed_s3_endpoints: tuple[str, ...] = ()
    # Directories shared_fs checkpoint_storage may lie in besides the cluster's checkpoints (both check).
    allowed_storage_roots: tuple[str, ...] = ()
    # Each agent's --trial-disk-limit: a local cluster shares one disk with its user ("0": none).
    trial_disk_limit: str = DEFAULT_TRIAL_DISK_LIMIT
    timeout_seconds: float = 60.0
    # Return only once each agent's trials start warm (its fork server's imports done), within the timeout.
    wait_warm: bool = True
    # Overridable so tests can start stand-in programs; maps "checkpoint-store"/"scheduler"/"agent".
    command: Callable[[str], list[str]] | None = None


def _command(opts: UpOptions, kind: str) -> list[str]:
    if opts.command is not None:
        return opts.command(kind)
    return processes.service_command(*_COMMANDS[kind])


def _check_port_free(port: int, flag: str) -> None:
    """Bound as the services bind (SO_REUSEADDR): a port whose old connections sit in TIME_WAIT after
    `cluster down` is free to them, so `down` then `up` works at once; a listening socket is not."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise ClusterError(
                    f"port {port} on {HOST} is already in use; pick another with {flag}"
                ) from e
            raise


def _load(paths: ClusterPaths) -> ClusterRecord | None:
    try:
        return load_state(paths.state_file)
    except StateError as e:
        raise ClusterError(str(e)) from e


def running(state: ClusterRecord) -> list[ServiceRecord]:
    return [s for s in state.services if processes.is_ours(s.pid, s.argv)]


class _Starter:
    """Starts services one by one, recording each in cluster.json; undoes everything on failure."""

    def __init__(self, opts: UpOptions, paths: ClusterPaths) -> None:
        self.opts = opts
        self.paths = paths
        self.state = ClusterRecord(home=str(paths.home), started_at=_timeutil.utc_now())
        self.children: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, kind: str, args: list[str], address: str = "") -> subprocess.Popen[bytes]:
        argv = [*_command(self.opts, kind), *args]
        log = self.paths.log(name)
        try:
            proc = processes.spawn(argv, log, cwd=self.paths.root)
        except OSError as e:
            raise ClusterError(f"cannot start {name} ({argv[0]}): {e}") from e
        self.children[name] = proc
        self.state.services.append(
            ServiceRecord(name, proc.pid, argv, str(log), address, started_at=_timeutil.utc_now())
        )
        save_state(self.paths.state_file, self.state)
        return proc

    def failure(self, name: str, why: str) -> ClusterError:
        log = self.paths.log(name)
        text = processes.tail(log)
        detail = f"\n--- last lines of {log} ---\n{text}" if text else f" ({log} is empty)"
        return ClusterError(f"{name} {why}{detail}")

    def check_alive(self, name: str) -> None:
        code = self.children[name].poll()
        if code is not None:
            raise self.failure(name, f"exited with code {code} while starting")

    def wait_serving(self, name: str, deadline: float) -> int:
        """Waits for the port file, then for gRPC health SERVING; returns the bound port."""
        port_file = self.paths.port_file(name)
        while True:
            self.check_alive(name)
            port = _read_port(port_file)
            if port is not None and health.is_serving(f"{HOST}:{port}"):
                return port
            if time.monotonic() > deadline:
                raise self.failure(name, f"did not come up within {self.opts.timeout_seconds:.0f} s")
            time.sleep(0.2)

    def wait_port(self, name: str, deadline: float) -> int:
        """Waits for an HTTP service's port file (written once it listens); returns the port."""
        while True:
            self.check_alive(name)
            port = _read_port(self.paths.port_file(name))
            if port is not None:
                return port
            if time.monotonic() > deadline:
                raise self.failure(name, f"did not come up within {self.opts.timeout_seconds:.0f} s")
            time.sleep(0.1)

    def wait_agents(self, master: str, names: list[str], deadline: float, token: str | None = None) -> None:
        while True:
            for name in names:
                self.check_alive(name)
            missing = sorted(set(names) - health.registered_agents(master, token=token))
            if not missing:
                return
            if time.monotonic() > deadline:
                raise self.failure(
                    missing[0],
                    f"did not register with the scheduler within {self.opts.timeout_seconds:.0f} s",
                )
            time.sleep(0.2)

    def wait_warm(self, names: list[str], deadline: float, out: Output) -> None:
        """Until each agent's trials start warm (`harness_warm_file`), so that the first trials of a
        cluster just started do not wait on those imports; past the deadline the cluster is up anyway
        (the first trials then wait for the imports instead)."""
        while True:
            for name in names:
                self.check_alive(name)
            cold = [n for n in names if not harness_warm_file(self.paths.agents / n).exists()]
            if not cold:
                return
            if time.monotonic() > deadline:
                late = ", ".join(cold)
                out(f"{late}: still importing after {self.opts.timeout_seconds:.0f} s; the first trials wait")
                return
            time.sleep(0.1)

    def start_supervisor(self, deadline: float) -> None:
        """Hands the services to the supervisor; returns once it has recorded itself in cluster.json."""
        argv = supervisor.supervisor_argv(self.paths.home)
        log = self.paths.log("supervisor")
        proc = processes.spawn(argv, log, cwd=self.paths.root)
        self.children["supervisor"] = proc
        while True:
            if proc.poll() is not None:
                raise self.failure("supervisor", f"exited with code {proc.returncode} while starting")
            recorded = _load(self.paths)
            if recorded is not None and recorded.supervisor_pid == proc.pid:
                self.state = recorded
                return
            if time.monotonic() > deadline:
                raise self.failure("supervisor", f"did not start within {self.opts.timeout_seconds:.0f} s")
            time.sleep(0.1)

    def undo(self) -> None:
        for name in reversed(list(self.children)):
            processes.stop_child(self.children[name])
        self.paths.state_file.unlink(missing_ok=True)


def _read_port(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def down_command(home: Path) -> str:
    """How the user stops this cluster: `--home` only when it is not the default."""
    return "pedl cluster down" + ("" if home == pedl_home(None) else f" --home {home}")


def up(opts: UpOptions, out: Output = print) -> ClusterRecord:
    if opts.agents < 0:
        raise ClusterError("--agents must be 0 or more")
    if opts.slots_per_agent < 1:
        raise ClusterError("--slots-per-agent must be at least 1")
    paths = ClusterPaths(opts.home)
    previous = _load(paths)
    if previous is not None:
        alive = running(previous)
        if processes.is_ours(previous.supervisor_pid, previous.supervisor_argv):
            alive.append(ServiceRecord("supervisor", previous.supervisor_pid, previous.supervisor_argv, ""))
        if alive:
            names = ", ".join(f"{s.name} (pid {s.pid})" for s in alive)
            raise ClusterError(
                f"a pedl cluster from {paths.home} is still running "
                f"(master at {previous.master or 'unknown'}; "
                f"running: {names}); stop it first with `{down_command(paths.home)}`"
            )
        out(f"Removing the state of a previous cluster that is no longer running ({paths.state_file})")
        paths.state_file.unlink(missing_ok=True)
    _check_port_free(opts.port, "--port")
    _check_port_free(opts.store_port, "--store-port")
    _check_port_free(opts.webui_port, "--webui-port")
    for d in (paths.root, paths.checkpoints, paths.agents):
        d.mkdir(parents=True, exist_ok=True)
    credentials.ensure(paths)
    for name in (STORE, SCHEDULER, WEBUI):
        paths.port_file(name).unlink(missing_ok=True)

    starter = _Starter(opts, paths)
    try:
        _start_all(starter, opts, paths, out)
        starter.start_supervisor(time.monotonic() + opts.timeout_seconds)
    except BaseException:
        starter.undo()
        raise
    return starter.state


def _start_all(starter: _Starter, opts: UpOptions, paths: ClusterPaths, out: Output) -> None:
    state = starter.state
    secret = ["--cluster-secret-file", str(credentials.secret_file(paths))]
    # Both ports are fixed before anything starts: the store asks the scheduler about users' tokens,
    # and a service the supervisor restarts must come back where its clients dial.
    scheduler_port = opts.port or _free_port()
    store_port = opts.store_port or _free_port()
    webui_port = opts.webui_port or _free_port()
    s3 = [*(a for b in opts.allowed_s3_buckets for a in ("--allowed-s3-bucket", b)),
          *(a for e in opts.allowed_s3_endpoints for a in ("--allowed-s3-endpoint", e))]  # fmt: skip
    roots = [
        a
        for r in (paths.checkpoints, *opts.allowed_storage_roots)
        for a in ("--allowed-storage-root", str(r))
    ]
    out(f"Starting the checkpoint store (log: {paths.log(STORE)})")
    starter.start(STORE, STORE, [
        "--host", HOST, "--port", str(store_port), "--storage-path", str(paths.checkpoints),
        "--port-file", str(paths.port_file(STORE)), "--master", f"{HOST}:{scheduler_port}", *secret, *s3,
        *(roots if opts.allowed_storage_roots else []),
    ])  # fmt: skip
    store_port = starter.wait_serving(STORE, time.monotonic() + opts.timeout_seconds)
    state.checkpoint_store = f"{HOST}:{store_port}"
    state.services[-1].address = state.checkpoint_store

    out(f"Starting the scheduler (log: {paths.log(SCHEDULER)})")
    starter.start(SCHEDULER, SCHEDULER, [
        "--host", HOST, "--port", str(scheduler_port), "--db", str(paths.db),
        "--checkpoint-store", state.checkpoint_store, "--port-file", str(paths.port_file(SCHEDULER)),
        *roots, "--log-level", "info", *secret,
        "--admin-password-file", str(credentials.admin_password_file(paths)),
        "--metrics-port", str(opts.metrics_port), *s3,
    ])  # fmt: skip
    port = starter.wait_serving(SCHEDULER, time.monotonic() + opts.timeout_seconds)
    state.master = f"{HOST}:{port}"
    state.services[-1].address = state.master
    save_state(paths.state_file, state)
    token = _login_admin(state.master, paths, out)

    # The agents before the web UI: their fork servers' imports (what `up` waits for last) overlap it.
    names = [f"agent-{i}" for i in range(1, opts.agents + 1)]
    if names:
        out(f"Starting {len(names)} agent(s) with {opts.slots_per_agent} slot(s) each")
    for name in names:
        work_dir = paths.agents / name
        work_dir.mkdir(parents=True, exist_ok=True)
        harness_warm_file(work_dir).unlink(missing_ok=True)  # a previous cluster's agent's
        starter.start(name, "agent", [
            "--master", state.master, "--agent-id", name, "--slots", str(opts.slots_per_agent),
            "--work-dir", str(work_dir), "--trial-disk-limit", opts.trial_disk_limit, *secret,
        ])  # fmt: skip

    out(f"Starting the web UI (log: {paths.log(WEBUI)})")
    starter.start(WEBUI, WEBUI, [
        "--master", state.master, "--host", HOST, "--port", str(webui_port),
        "--port-file", str(paths.port_file(WEBUI)),
    ])  # fmt: skip
    webui_port = starter.wait_port(WEBUI, time.monotonic() + opts.timeout_seconds)
    state.webui = f"http://{HOST}:{webui_port}/"
    state.services[-1].address = state.webui
    save_state(paths.state_file, state)

    starter.wait_agents(state.master, names, time.monotonic() + opts.timeout_seconds, token)
    if names and opts.wait_warm:
        out("Waiting for the agents' harness processes to import the frameworks (torch, TensorFlow)")
        starter.wait_warm(names, time.monotonic() + opts.timeout_seconds, out)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _login_admin(master: str, paths: ClusterPaths, out: Output) -> str:
    """Logs this machine's CLI in as the cluster's admin (auth.json beside the cluster's state)."""
    from pedl.auth.login import login

    try:
        reply = login(master, credentials.ADMIN, credentials.admin_password(paths), paths.home / "auth.json")
    except grpc.RpcError as e:
        raise ClusterError(f"cannot log in to the new scheduler as {credentials.ADMIN}: {e.details()}") from e
    out(
        f"Logged in as {credentials.ADMIN} (its password is in {credentials.admin_password_file(paths)}; "
        f"the cluster secret in {credentials.secret_file(paths)})"
    )
    return reply.token


def down(home: Path, out: Output = print) -> int:
    """Stops the supervisor, then every recorded process (agents first); returns how many were running.

    The supervisor goes first so it restarts nothing meanwhile; cluster.json is read again after it
    exited, so the pids stopped are those of what runs now, restarted services included."""
    paths = ClusterPaths(home)
    state = _load(paths)
    if state is None:
        out(f"No pedl cluster is recorded in {paths.home}; nothing to stop")
        return 0
    if state.supervisor_pid:
        outcome = processes.stop(state.supervisor_pid, state.supervisor_argv)
        out(f"supervisor (pid {state.supervisor_pid}) {outcome}")
        state = _load(paths) or state
    order = {STORE: 2, SCHEDULER: 1, WEBUI: 0}
    stopped = 0
    for svc in sorted(state.services, key=lambda s: order.get(s.name, 0)):
        outcome = processes.stop(svc.pid, svc.argv)
        stopped += outcome != "was not running"
        out(f"{svc.name} (pid {svc.pid}) {outcome}")
    paths.state_file.unlink(missing_ok=True)
    for name in (STORE, SCHEDULER, WEBUI):
        paths.port_file(name).unlink(missing_ok=True)
    out(f"pedl cluster in {paths.home} is down" + ("" if stopped else " (nothing was running)"))
    return stopped
