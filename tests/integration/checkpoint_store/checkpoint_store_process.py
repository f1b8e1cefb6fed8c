"""Starting and stopping a real `pedl-checkpoint-store` process, for any test that needs one."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

STARTUP_TIMEOUT_SECONDS = 60.0


def _executable() -> str:
    beside = Path(sys.executable).parent / "pedl-checkpoint-store"
    found = str(beside) if beside.exists() else shutil.which("pedl-checkpoint-store")
    if found is None:
        raise RuntimeError("pedl-checkpoint-store is not installed (pip install -e .)")
    return found


def start_checkpoint_store(
    tmp_path: Path, *, storage_path: Path | None = None, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Starts the store on a free port and waits until it serves; returns (process, "127.0.0.1:port").

    Storage defaults to `tmp_path/checkpoints`; logs go to `tmp_path/checkpoint-store-*.log`.
    The caller must stop the process (see `stop_process`), also when its test fails.
    """
    tag = uuid.uuid4().hex[:8]
    port_file = tmp_path / f"checkpoint-store-{tag}.port"
    log_path = tmp_path / f"checkpoint-store-{tag}.log"
    args = [
        _executable(),
        "--host", "127.0.0.1",
        "--port", "0",
        "--port-file", str(port_file),
        "--storage-path", str(storage_path or tmp_path / "checkpoints"),
    ]  # fmt: skip
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while not port_file.exists():
            if proc.poll() is not None:
                raise RuntimeError(f"pedl-checkpoint-store exited {proc.returncode}:\n{log_path.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"pedl-checkpoint-store did not start:\n{log_path.read_text()}")
            time.sleep(0.05)
        return proc, f"127.0.0.1:{int(port_file.read_text())}"
    except BaseException:
        stop_process(proc)
        raise


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> int:
    """SIGTERM, then SIGKILL if it lingers; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
