"""What a PatchExperiment request changes, checked against the stored experiment (pure logic)."""

from __future__ import annotations

import json
from typing import Any

ENDED = ("COMPLETED", "ERROR", "CANCELED")
MAX_LABEL = 255
MAX_DESCRIPTION = 4096


class PatchError(ValueError):
    pass


def changes(
    row: dict[str, Any], request: Any, max_description: int = MAX_DESCRIPTION, max_label: int = MAX_LABEL
) -> dict[str, Any]:
    """Keyword arguments for storage's patch_experiment; PatchError names what is wrong. The limits are
    the scheduler's --max-description-length and --max-label-length."""
    out: dict[str, Any] = {}
    if request.HasField("description"):
        if len(request.description) > max_description:
            raise PatchError(
                f"description is longer than {max_description} characters "
                "(--max-description-length raises the limit)"
            )
        out["description"] = request.description
    if request.add_labels or request.remove_labels:
        labels = list(json.loads(row.get("labels_json") or "[]"))
        for label in request.add_labels:
            if not label.strip() or len(label) > max_label:
                raise PatchError(
                    f"label {label[:40]!r} must be 1-{max_label} characters, not blank "
                    "(--max-label-length raises the limit)"
                )
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
