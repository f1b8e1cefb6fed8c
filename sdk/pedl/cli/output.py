"""--json/--csv on list and describe commands, and colour for states on a terminal."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pedl.records import to_csv

_COLOURS = {
    "COMPLETED": "32",
    "ACTIVE": "36",
    "RUNNING": "36",
    "PAUSED": "33",
    "STOPPING_CANCELED": "33",
    "CANCELED": "33",
    "ERROR": "31",
}


def add_format_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print JSON (numbers as numbers)")
    group.add_argument("--csv", action="store_true", help="print CSV (one row per item)")


def emit(
    args: argparse.Namespace, records: Any, text: str, csv_rows: Sequence[Mapping[str, Any]] | None = None
) -> None:
    """JSON of `records`, CSV of `csv_rows` (default: `records`), else the human text."""
    if getattr(args, "json", False):
        print(json.dumps(records, indent=2, sort_keys=True))
    elif getattr(args, "csv", False):
        rows: Any = csv_rows if csv_rows is not None else records
        print(to_csv(rows if isinstance(rows, list) else [rows]))
    else:
        print(colour_states(text))


def use_colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def colour_states(text: str) -> str:
    """State words in tables coloured on a terminal; unchanged otherwise or with NO_COLOR."""
    if not use_colour():
        return text
    import re

    pattern = re.compile(r"(?<![A-Z_])(" + "|".join(sorted(_COLOURS, key=len, reverse=True)) + r")(?![A-Z_])")
    return pattern.sub(lambda m: f"\033[{_COLOURS[m.group(1)]}m{m.group(1)}\033[0m", text)
