"""Writes README.md's table of the published examples (`catalogue.published_table`), or with
`--check` fails when it is stale."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(REPO / "tests"), str(REPO / "scripts")]

from catalogue import published_table  # noqa: E402
from readme_section import write_or_check  # noqa: E402

BEGIN = "<!-- published-examples-table: begin (tests/conformance/published/catalogue_table.py) -->"
END = "<!-- published-examples-table: end -->"

if __name__ == "__main__":
    section = f"{BEGIN}\n{published_table()}{END}"
    sys.exit(write_or_check(REPO / "README.md", BEGIN, END, section, "published examples table", sys.argv))
