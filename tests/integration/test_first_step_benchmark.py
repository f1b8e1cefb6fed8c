"""The first-step benchmark runs (sandboxed and not) and prints the sandbox's start cost."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)  # two cluster starts: over the default 300 s on a loaded 2-core machine
def test_the_first_step_benchmark_runs_in_smoke_mode() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "first_step_latency.py"), "--smoke"],
        capture_output=True, text=True, timeout=540, check=True,
    ).stdout  # fmt: skip
    assert "--isolation none" in out and "beyond the import" in out
    if shutil.which("bwrap"):
        assert "--isolation bwrap" in out and "sandbox start cost (bwrap - none)" in out
        assert "deny-list" in out and "ratio allow-list / deny-list" in out  # before/after, same run
