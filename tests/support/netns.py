"""Several machines on one: network namespaces joined by a bridge, each host with its own directories.

Every host is a namespace with `lo` and one `eth0` on a bridge that lives in a namespace of its own;
addresses come from 198.18.0.0/24 only (a /28 block per rig, so rigs of modules running at once
never share one), and no route leaves the namespaces. Scheduler and checkpoint store run on one
host, agents on others, each with its own PEDL_HOME and work directory; only the cluster secret
(and with TLS the CA certificate) is copied between them. Nothing in one host's directory is named
on another's command line, so nothing can pass between hosts through a path.

The test process is on no host: it reaches the scheduler through a forwarder that listens on
127.0.0.1 and connects from the `client` host (support/ns_forward.py).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from support.processes import BIN, Service, TlsFiles, _env, _write_secret, login, stop

SCHEDULER_PORT = 8080
STORE_PORT = 8081
FORWARDER = Path(__file__).with_name("ns_forward.py")


def unavailable_reason() -> str | None:
    """Why this machine cannot run the rig (one line), or None."""
    if os.geteuid() != 0:
        return "the multi-host rig makes network namespaces, which needs root"
    if shutil.which("ip") is None:
        return "the multi-host rig needs iproute2's `ip netns` (no `ip` command)"
    probe = f"pedl-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` fails here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")


@dataclass
class Host:
    name: str
    namespace: str
    address: str
    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def work(self) -> Path:
        return self.root / "work"

    def command(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.namespace, *argv]

    def pids(self) -> list[int]:
        out = subprocess.run(
            ["ip", "netns", "pids", self.namespace], capture_output=True, text=True, timeout=30
        ).stdout
        return [int(p) for p in out.split()]

    def kill_everything(self) -> None:
        """SIGKILL every process in the namespace, as a machine that lost power."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@dataclass
class Rig:
    """The hosts, the services on them, and how the test process reaches the scheduler."""

    workdir: Path
    hosts: dict[str, Host]
    tls: TlsFiles | None
    services: list[Service] = field(default_factory=list)
    token: str = ""
    # The scheduler, as the test process reaches it (the forwarder to it from the client host).
    master: str = ""
    # Added to every host's environment (e.g. SLURM_CONF for a Slurm cluster on the rig).
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def scheduler_address(self) -> str:
        return f"{self.hosts['server'].address}:{SCHEDULER_PORT}"

    def logs(self) -> str:
        return "\n".join(f"==== {s.name}\n{s.log()[-4000:]}" for s in self.services)

    def environment(self, host: Host) -> dict[str, str]:
        """A host's environment: the test's, less anything of pedl's or of gloo's, own PEDL_HOME."""
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PEDL_", "GLOO_", "NCCL_", "MASTER_", "PYTEST_"))
        }
        return {**keep, **self.extra_env, "PEDL_HOME": str(host.home)}

    def start(self, host: Host | None, name: str, argv: list[str], wait_for: Path | None = None) -> Service:
        """Starts `argv` on `host` (None: outside the rig, in the test's directory)."""
        root = host.root if host else self.workdir
        log_path = root / f"{name}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                host.command(argv) if host else argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self.environment(host) if host else dict(os.environ),
                cwd=root,
            )
        service = Service(name, process, host.address if host else "", log_path)
        self.services.append(service)
        deadline = time.monotonic() + 60
        while wait_for is not None and not wait_for.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start:\n{service.log()[-3000:]}")
            time.sleep(0.05)
        return service

    def copy_to(self, host: Host, source: Path) -> Path:
        """What an operator copies by hand onto another machine."""
        target = host.root / source.name
        shutil.copy2(source, target)
        return target

    def restart_agents(self, slots: int) -> None:
        """Stops every agent and starts it again offering `slots` slots, as an operator would."""
        agents = [s for s in self.services if s.name.startswith("agent-") and s.process.poll() is None]
        for service in agents:
            stop(service.process)
            self.services.remove(service)
        for service in agents:
            self.start_agent(self.hosts[service.name.removeprefix("agent-")], slots)
        wait_for_agents(self, len(agents), slots)

    def start_agent(self, host: Host, slots: int, extra: list[str] | None = None) -> Service:
        secret = self.copy_to(host, self.hosts["server"].root / "cluster-secret")
        tls = ["--tls-ca", str(self.copy_to(host, self.tls.ca))] if self.tls else []
        argv = [
            str(BIN / "pedl-agent"), "--master", self.scheduler_address, "--agent-id", host.name,
            "--slots", str(slots), "--work-dir", str(host.work), "--cluster-secret-file", str(secret),
            *tls, *(extra or []),
        ]  # fmt: skip
        return self.start(host, f"agent-{host.name}", argv)

    def cli(self, host: Host, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """`pedl ARGS` run on `host` as a user there would, with its own PEDL_HOME."""
        env = {**self.environment(host), "PEDL_MASTER": self.scheduler_address, "PEDL_TOKEN": self.token}
        if self.tls:
            env["PEDL_TLS_CA"] = str(self.copy_to(host, self.tls.ca))
        return subprocess.run(
            host.command([str(BIN / "pedl"), *args]),
            capture_output=True, text=True, timeout=timeout, env=env, cwd=host.root,
        )  # fmt: skip


def _make_hosts(tag: str, block: int, names: list[str], workdir: Path) -> tuple[str, dict[str, Host]]:
    """The bridge's namespace and one namespace per host, wired; addresses 198.18.0.<16*block + n>/28."""
    if not 1 <= block <= 15 or len(names) > 13:
        raise ValueError("a rig takes one /28 block (1..15) of 198.18.0.0/24 and at most 13 hosts")
    bridge = f"{tag}-br"
    _ip("netns", "add", bridge)
    _ip("-n", bridge, "link", "set", "lo", "up")
    _ip("-n", bridge, "link", "add", "br0", "type", "bridge")
    _ip("-n", bridge, "link", "set", "br0", "up")
    hosts: dict[str, Host] = {}
    for n, name in enumerate(names, start=1):
        namespace = f"{tag}-{name}"
        address = f"198.18.0.{16 * block + n}"
        _ip("netns", "add", namespace)
        hosts[name] = Host(name, namespace, address, workdir / name)
        _ip("-n", bridge, "link", "add", f"v{n}", "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _ip("-n", bridge, "link", "set", f"v{n}", "master", "br0", "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", namespace, "addr", "add", f"{address}/28", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "eth0", "up")
        for directory in (hosts[name].home, hosts[name].work):
            directory.mkdir(parents=True)
    return bridge, hosts


def remove_orphans() -> None:
    """Removes the namespaces of rigs whose test process is gone (killed before its finalizer ran)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        owner = re.fullmatch(r"pedl(\d+)b\d+-\w+", name)
        if owner is not None and not Path(f"/proc/{owner[1]}").exists():
            _remove_namespace(name)


def _remove_namespace(namespace: str) -> None:
    """Kills what still runs in the namespace (by `ip netns pids`), then deletes it."""
    out = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout
    for pid in out.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


@contextmanager
def multihost_rig(
    workdir: Path,
    block: int,
    agents: int = 2,
    slots: int = 2,
    tls_dir: Path | None = None,
    before_scheduler: Callable[[Rig], None] | None = None,
    scheduler_args: list[str] | None = None,
    start_agents: bool = True,
) -> Iterator[Rig]:
    """Scheduler and store on host `server`, `agents` agent hosts `host1`.., a `client` host.

    With `tls_dir`, a CA and a certificate for the server host's address; every channel is TLS.
    `before_scheduler` runs once the hosts exist (it may start daemons there, set `extra_env`);
    without `start_agents` the agent hosts run no pedl-agent of the rig's own."""
    tag = f"pedl{os.getpid()}b{block}"
    names = ["server", *[f"host{i}" for i in range(1, agents + 1)], "client"]
    workdir.mkdir(parents=True, exist_ok=True)
    namespaces = [f"{tag}-br", *[f"{tag}-{n}" for n in names]]
    rig: Rig | None = None
    remove_orphans()
    try:
        _, hosts = _make_hosts(tag, block, names, workdir)
        server = hosts["server"]
        tls = None
        if tls_dir is not None:
            from support.tls import make_tls

            tls = make_tls(tls_dir, ips=[server.address])
        rig = Rig(workdir, hosts, tls)
        _write_secret(server.root / "cluster-secret")
        _write_secret(server.root / "admin-password")
        tls_args = tls.server_args() if tls else []
        store_at, scheduler_at = f"{server.address}:{STORE_PORT}", f"{server.address}:{SCHEDULER_PORT}"
        rig.start(
            server, "checkpoint_store",
            [str(BIN / "pedl-checkpoint-store"), "--host", server.address, "--port", str(STORE_PORT),
             "--storage-path", str(server.work / "checkpoints"),
             "--port-file", str(server.root / "store.port"),
             "--cluster-secret-file", str(server.root / "cluster-secret"),
             "--master", scheduler_at, *tls_args],
            server.root / "store.port",
        )  # fmt: skip
        if before_scheduler is not None:
            before_scheduler(rig)
        rig.start(
            server, "scheduler",
            [str(BIN / "pedl-scheduler"), "--host", server.address, "--port", str(SCHEDULER_PORT),
             "--cluster-secret-file", str(server.root / "cluster-secret"),
             "--admin-password-file", str(server.root / "admin-password"), *tls_args,
             "--db", str(server.work / "pedl.db"), "--checkpoint-store", store_at,
             "--port-file", str(server.root / "scheduler.port"), "--agent-reconnect-grace", "3",
             "--heartbeat-interval", "1", "--heartbeat-timeout", "10", *(scheduler_args or [])],
            server.root / "scheduler.port",
        )  # fmt: skip
        port_file = workdir / "forwarder.port"
        rig.start(
            None, "forwarder",
            [sys.executable, str(FORWARDER), str(port_file), hosts["client"].namespace, scheduler_at],
            port_file,
        )  # fmt: skip
        rig.master = f"127.0.0.1:{port_file.read_text().strip()}"
        tls_env = {"PEDL_TLS_CA": str(tls.ca)} if tls else {}
        with _env(**tls_env):
            password = (server.root / "admin-password").read_text().strip()
            rig.token = login(rig.master, "admin", password)
            with _env(PEDL_TOKEN=rig.token):
                if start_agents:
                    for i in range(1, agents + 1):
                        rig.start_agent(hosts[f"host{i}"], slots)
                    wait_for_agents(rig, agents, slots)
                yield rig
    finally:
        for service in reversed(rig.services if rig else []):
            stop(service.process)
        for namespace in namespaces:
            _remove_namespace(namespace)


def wait_for_agents(rig: Rig, count: int, slots: int | None = None, timeout: float = 60) -> None:
    """Until `count` agents are connected (each with `slots` slots, if given)."""
    from pedl import _grpc
    from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc

    with _grpc.channel(rig.master) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            agents = stub.ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=5).agents
            if len([a for a in agents if slots is None or len(a.slots) == slots]) >= count:
                return
            time.sleep(0.1)
    raise RuntimeError(f"agents did not register:\n{rig.logs()}")
