"""benchmarks/describe_trials.py runs (its figures are for people, not asserted here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_the_describe_benchmark_runs_in_smoke_mode() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "describe_trials.py"), "--smoke"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "50 trials: `det e describe --json`" in result.stdout
