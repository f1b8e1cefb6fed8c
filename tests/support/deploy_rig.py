"""Hosts for running a shipped deployment as it is (tests/multihost/test_*_deploy.py): the rig's
network namespaces (support.netns) plus what the deployment expects around it: an AWS API (moto, on
a host of its own), a PostgreSQL server reachable from a `db` host, and forwarders that let the test
process (on no host) reach a service as a client host would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from support.netns import FORWARDER, Host, _make_hosts, _remove_namespace, remove_orphans
from support.processes import stop

MOTO_PORT = 5000


@dataclass
class DeployRig:
    workdir: Path
    hosts: dict[str, Host]
    processes: list[subprocess.Popen] = field(default_factory=list)
    # The scheduler as the test process reaches it (a forwarder from the client host), and a login.
    master: str = ""
    token: str = ""
    log_sources: list = field(default_factory=list)

    def logs(self) -> str:
        return "\n".join(source() for source in self.log_sources)

    def background(
        self, host: Host | None, argv: list[str], name: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        root = host.root if host else self.workdir
        with open(root / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                host.command(argv) if host else argv,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=root,
                env=env if env is not None else dict(os.environ),
            )  # fmt: skip
        self.processes.append(process)
        return process

    def _relay(
        self, name: str, namespace: str, target: str, host: Host | None = None, listen: str = ""
    ) -> str:
        port_file = self.workdir / f"{name}.port"
        argv = [
            sys.executable,
            str(FORWARDER),
            str(port_file),
            namespace,
            target,
            *([listen] if listen else []),
        ]
        process = self.background(host, argv, name)
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"forwarder {name} did not start: {(self.workdir / (name + '.log')).read_text()}"
                )
            time.sleep(0.05)
        return port_file.read_text().strip()

    def forward(self, target: str) -> str:
        """127.0.0.1:PORT here, relayed to `target` as the client host dials it."""
        port = self._relay(f"to-{target.replace(':', '-')}", self.hosts["client"].namespace, target)
        return f"127.0.0.1:{port}"

    def expose(self, host: Host, port: int, target: str) -> None:
        """`host`'s address:`port` relayed to `target` in the test's own network namespace."""
        mine = f"/proc/{os.getpid()}/ns/net"
        self._relay(f"expose-{host.name}-{port}", mine, target, host=host, listen=f"{host.address}:{port}")


@contextmanager
def deploy_rig(workdir: Path, block: int, names: list[str]) -> Iterator[DeployRig]:
    """Hosts `names` (include `client`) on one bridge; every process started is ended after."""
    tag = f"pedl{os.getpid()}b{block}"
    workdir.mkdir(parents=True, exist_ok=True)
    remove_orphans()
    rig: DeployRig | None = None
    try:
        _, hosts = _make_hosts(tag, block, names, workdir)
        rig = DeployRig(workdir, hosts)
        yield rig
    finally:
        for process in reversed(rig.processes if rig else []):
            stop(process)
        for namespace in [f"{tag}-{n}" for n in names] + [f"{tag}-br"]:
            _remove_namespace(namespace)


def start_moto(rig: DeployRig, host: Host, port: int = MOTO_PORT) -> tuple[str, str]:
    """moto's AWS API on `host`: (its URL from the rig's hosts, its URL from the test process)."""
    binary = shutil.which("moto_server")
    if binary is None:
        raise RuntimeError("moto_server is not on PATH (pip install 'moto[server]')")
    rig.background(host, [binary, "-H", host.address, "-p", str(port)], "moto")
    inside = f"http://{host.address}:{port}"
    outside = f"http://{rig.forward(f'{host.address}:{port}')}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{outside}/moto-api/", timeout=5)
            return inside, outside
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError((host.root / "moto.log").read_text()) from None
            time.sleep(0.2)


def aws_client(service: str, endpoint: str):  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client(
        service, endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )  # fmt: skip


def agents_in(text: str) -> set[str]:
    """The agents a trial's "started on" lines name."""
    return set(re.findall(r"agent (\S+) \(slots", text))
