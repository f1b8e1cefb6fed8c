"""The README's CLI table is generated from the parser; it must list what the parser accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_readme_cli_table_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_table.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_table_names_determined_verbs_and_refusals() -> None:
    text = (ROOT / "README.md").read_text()
    for row in (
        "`det experiment list-trials (lt) ID [--json] [--csv]`",
        "`det experiment create CONFIG CONTEXT_DIR [-f\\|--follow] [-t\\|--test-mode\\|--test] [--local] "
        "[--config KEY=VALUE] [--paused] [--follow-first-trial]`",
        "`det notebook (notebooks)` | (not in pedl)",
    ):
        assert row in text
