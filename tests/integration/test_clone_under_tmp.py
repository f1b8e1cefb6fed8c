"""pedl runs from a checkout under /tmp: a real clone of this commit there runs `scripts/demo` to
COMPLETED, its .venv inside the clone (which a sandbox whose private /tmp hid the environment broke).

The clone's .venv is made cheaply: a venv whose .pth file reaches this environment's installed
packages, with only pedl itself installed (editable, from the clone).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
# The ports scripts/demo's `pedl cluster up` takes (its defaults): the test runs where they are free.
FIXED_PORTS = (8080, 8090, 8100)


def _busy(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _cheap_venv(clone: Path) -> None:
    """The clone's .venv: this environment's packages through a .pth, pedl installed from the clone,
    and the stamp scripts/setup-env checks, so it installs nothing more."""
    venv = clone / ".venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = venv / "lib" / version / "site-packages"
    ours = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    ours.append(sysconfig.get_paths()["purelib"])
    (site / "zz_parent_site.pth").write_text("".join(f"{p}\n" for p in dict.fromkeys(ours)))
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        + ["--no-deps", "--no-build-isolation", "-e", str(clone)],
        check=True,
        cwd=clone,
    )
    want = hashlib.sha256((clone / "pyproject.toml").read_bytes() + (clone / "setup.py").read_bytes())
    (venv / ".pedl-installed").write_text(want.hexdigest() + "\n")


@pytest.mark.timeout(900)
@pytest.mark.skipif(any(_busy(p) for p in FIXED_PORTS), reason="scripts/demo's fixed ports are in use")
def test_a_clone_under_tmp_runs_the_demo_to_completed() -> None:
    clone = Path(tempfile.mkdtemp(prefix="pedl-clone-", dir="/tmp")) / "pedl"
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PEDL_", "VIRTUAL_ENV"))}
    env["PEDL_HOME"] = str(clone / ".cache" / "demo")
    proc = None
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", commit], cwd=clone, check=True)
        _cheap_venv(clone)
        # The demo's example, shortened (what failed was starting it, not training it long).
        example = clone / "examples" / "digits_pytorch" / "const.yaml"
        text = example.read_text()
        assert "max_steps: 20" in text
        example.write_text(text.replace("max_steps: 20", "max_steps: 2"))
        proc = subprocess.Popen(
            ["bash", "scripts/demo"],
            cwd=clone,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-4000:]
        assert "COMPLETED" in out, out[-4000:]
        assert "No such file or directory" not in out, out[-4000:]
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if (clone / ".venv" / "bin" / "pedl").exists():
            subprocess.run(
                [str(clone / ".venv" / "bin" / "pedl"), "cluster", "down"], env=env, cwd=clone, timeout=60
            )
        shutil.rmtree(clone.parent, ignore_errors=True)
