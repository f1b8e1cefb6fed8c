"""What a PatchExperiment request changes, checked against the stored experiment (pure logic)."""

from __future__ import annotations

import json
from typing import Any

ENDED = ("COMPLETED", "ERROR", "CANCELED")
MAX_LABEL = 255
MAX_DESCRIPTION = 4096


class PatchError(ValueError):
    pass


def changes(row: dict[str, Any], request: Any) -> dict[str, Any]:
    """Keyword arguments for storage's patch_experiment; PatchError names what is wrong."""
    out: dict[str, Any] = {}
    if request.HasField("description"):
        if len(request.description) > MAX_DESCRIPTION:
            raise PatchError(f"description is longer than {MAX_DESCRIPTION} characters")
        out["description"] = request.description
    if request.add_labels or request.remove_labels:
        labels = list(json.loads(row.get("labels_json") or "[]"))
        for label in request.add_labels:
            if not label.strip() or len(label) > MAX_LABEL:
                raise PatchError(f"label {label!r} must be 1-{MAX_LABEL} characters, not blank")
            if label not in labels:
                labels.append(label)
        missing = [label for label in request.remove_labels if label not in labels]
        if missing:
            raise PatchError(f"experiment {row['id']} has no label {missing[0]!r}")
        out["labels_json"] = json.dumps([label for label in labels if label not in request.remove_labels])
    if request.HasField("archived"):
        if request.archived and row["state"] not in ENDED:
            raise PatchError(
                f"experiment {row['id']} is {row['state']}: only an ended experiment can be archived "
                "(kill it first)"
            )
        out["archived"] = request.archived
    return out
