"""Service processes: how to run them, whether a recorded PID is still ours, and stopping them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def service_command(script: str, module: str) -> list[str]:
    """The venv's console script next to sys.executable, else the module's main() via this Python."""
    candidate = Path(sys.executable).parent / script
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return [str(candidate)]
    code = f"import sys; from {module} import main; sys.exit(main())"
    return [sys.executable, "-c", code]


def spawn(argv: Sequence[str], log_path: Path, cwd: Path, append: bool = False) -> subprocess.Popen[bytes]:
    """Own session, so the service outlives the CLI and a terminal's Ctrl-C does not reach it.

    `append` keeps what a crashed predecessor wrote (its last lines say why it died).
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log_path, "ab" if append else "wb") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            close_fds=True,
        )


def _cmdline(pid: int) -> list[str] | None:
    if Path("/proc/self/cmdline").exists():
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return [a.decode(errors="replace") for a in raw.split(b"\0") if a] or None
    ps = shutil.which("ps")
    if ps is None:
        return None
    out = subprocess.run([ps, "-o", "command=", "-p", str(pid)], capture_output=True, text=True)
    return out.stdout.split() or None


def is_ours(pid: int, argv: Sequence[str]) -> bool:
    """True when `pid` is alive and runs `argv` (a recycled PID running something else is not ours).

    Console scripts show up as `python <script> args...`, so the arguments are compared as a suffix.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    actual = _cmdline(pid)  # None for zombies and vanished processes
    if not actual:
        return False
    args = list(argv[1:])
    if not args:
        return Path(actual[0]).name == Path(argv[0]).name
    return " ".join(actual).endswith(" ".join(args))


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def stop(pid: int, argv: Sequence[str], grace_seconds: float = 10.0) -> str:
    """SIGTERM, wait, then SIGKILL; returns what happened, for the user."""
    if not is_ours(pid, argv):
        return "was not running"
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        if not is_ours(pid, argv):
            return "stopped"
        time.sleep(0.1)
    _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and is_ours(pid, argv):
        time.sleep(0.1)
    return "killed (did not exit on SIGTERM)"


def stop_child(proc: subprocess.Popen[bytes], grace_seconds: float = 10.0) -> None:
    """Stops a process this process started (and reaps it)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
