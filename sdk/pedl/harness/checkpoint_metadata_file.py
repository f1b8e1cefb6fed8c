"""A Core API checkpoint's metadata.json: Determined's keys (`steps_completed`, the user's
metadata) written over what a framework put there first (pedl's PyTorch Trainer writes its
framework and format into the same directory), keeping the framework's keys so the checkpoint
can still be restored from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILE = "metadata.json"


def write_metadata(directory: Path, metadata: dict[str, Any]) -> None:
    """`directory`/metadata.json becomes what was there (a JSON object) updated by `metadata`."""
    try:
        found = json.loads((directory / FILE).read_text())
    except (OSError, ValueError):
        found = {}
    kept = found if isinstance(found, dict) else {}
    (directory / FILE).write_text(json.dumps({**kept, **metadata}, sort_keys=True))
