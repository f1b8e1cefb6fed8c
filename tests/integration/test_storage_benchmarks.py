"""The storage benchmarks (trial creation, results ingest) run through the scheduler's own code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def smoke(script: str) -> str:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--smoke"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip


def test_the_trial_creation_benchmark_runs_in_smoke_mode() -> None:
    assert "SQLite: 100 trials created" in smoke("trial_creation.py")


def test_the_results_ingest_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("results_ingest.py")
    assert "(320 steps) from 16 concurrent trials" in out and "us/result" in out
