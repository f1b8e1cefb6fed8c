"""A smoke of scripts/determined-e2e: five of Determined 0.38.1's own e2e_cpu tests, unchanged, against
a fresh pedl cluster (the whole selection is too slow for CI; its figure is in the README). Skipped
when Determined's client cannot be installed from PyPI or the upstream e2e_tests tree is absent."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_determined_client import ROOT, install

pytestmark = pytest.mark.e2e
UPSTREAM = "shared/upstream/determined/0.38.1/e2e_tests"
TREE = Path(
    os.environ.get("E2E_TREE")
    or next(
        (p for p in (ROOT.parent / UPSTREAM, Path("/work") / UPSTREAM) if p.is_dir()), ROOT.parent / UPSTREAM
    )
)
SMOKE = [
    "tests/cluster/test_agent.py::test_agent_version",
    "tests/cluster/test_users.py::test_login_wrong_password",
    # det trial describe --metrics: every checkpoint (GC'd ones too) and summaryMetrics
    "tests/experiment/test_metrics.py::test_trial_describe_metrics",
    # GET /tasks names the running trial's experiment; a cancel while the noop trial sleeps wins
    "tests/experiment/test_noop.py::test_cancel_active_experiment_unready",
    # slots_per_trial: 1000 is queued (Determined's warning), paused, activated (QUEUED), killed
    "tests/experiment/test_noop.py::test_pause_of_experiment_without_trials",
]


def test_determined_own_e2e_tests_pass_against_pedl() -> None:
    if not (TREE / "tests" / "conftest.py").is_file():
        pytest.skip(f"Determined's e2e_tests tree is not at {TREE} (set E2E_TREE)")
    try:
        install("0.38.1")
    except AssertionError as e:
        pytest.skip(f"Determined's client could not be installed from PyPI (offline?): {str(e)[-300:]}")
    r = subprocess.run(
        [str(ROOT / "scripts" / "determined-e2e"), *SMOKE],
        cwd=ROOT, env={**os.environ, "E2E_TREE": str(TREE)}, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0 and re.search(rf"\b{len(SMOKE)} passed\b", r.stdout), (
        r.stdout[-4000:] + r.stderr[-2000:]
    )
