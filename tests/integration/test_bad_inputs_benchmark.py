"""`benchmarks/bad_inputs.py --smoke`: a few bad configs (Determined's own failing schema cases, where
they are on this machine), a bad model definition and crafted archives sent to `pedl experiment
create` on a real local cluster; each must be refused at create with exactly one line, nothing made."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from test_benchmark_smoke import smoke

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bad_input_cases import schema_cases_dir  # noqa: E402

pytestmark = pytest.mark.integration


def test_bad_inputs_in_smoke_mode_are_each_refused_at_create_with_one_line() -> None:
    out = smoke("bad_inputs.py")
    kinds = ["model definitions", "archives"] + (["configs"] if schema_cases_dir() else [])
    for kind in kinds:
        row = re.search(rf"^\| {kind} \| (\d+) \| (\d+) \| 0 \| 0 \| 0 \|$", out, re.M)
        assert row and int(row.group(1)) == int(row.group(2)) > 0, out
    assert re.search(r"^sent: \d+; refused at create with one line: \d+; needing a look: 0$", out, re.M), out
