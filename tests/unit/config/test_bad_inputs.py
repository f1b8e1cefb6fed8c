"""Every bad input of README.md's table is refused at create in one line naming what is wrong, and the
table shows what pedl answers now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bad_inputs import CASES, REPO, BadInput, answer


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.what)
def test_a_bad_input_is_refused_in_one_line(case: BadInput) -> None:
    text = answer(case)
    assert text, f"{case.what}: accepted"
    assert "\n" not in text and "Traceback" not in text and len(text) < 400, text


def test_the_readme_table_of_bad_inputs_is_current() -> None:
    script = Path(__file__).with_name("bad_inputs.py")
    check = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, cwd=REPO)
    assert check.returncode == 0, check.stdout + check.stderr
