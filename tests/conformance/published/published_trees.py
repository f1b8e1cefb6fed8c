"""Where the published example trees are (Determined's `examples/` of nine releases and the PEDL
authors' examples, /work/shared/upstream: test inputs, never copied into pedl), and what they hold."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[3]


def upstream() -> Path:
    """$PEDL_UPSTREAM, else the `shared/upstream` folder beside the checkout (or the main one's)."""
    for candidate in (
        os.environ.get("PEDL_UPSTREAM"),
        _REPO.parent / "shared" / "upstream",
        Path("/work/shared/upstream"),
    ):
        if candidate and (Path(candidate) / "pedl-examples").is_dir():
            return Path(candidate)
    pytest.skip("the published example trees are not here (set PEDL_UPSTREAM to their folder)")


def releases() -> list[Path]:
    """Each Determined release's `examples/` folder, oldest first."""
    found = [p / "examples" for p in (upstream() / "determined").iterdir() if (p / "examples").is_dir()]
    return sorted(found, key=lambda p: tuple(int(x) for x in p.parent.name.split(".")))


def pedl_examples() -> Path:
    return upstream() / "pedl-examples"
