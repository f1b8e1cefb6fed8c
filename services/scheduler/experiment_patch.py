"""What a PatchExperiment request changes, checked against the stored experiment (pure logic)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pedl.config.experiment import ExperimentConfig

ENDED = ("COMPLETED", "ERROR", "CANCELED")
MAX_LABEL = 255
MAX_DESCRIPTION = 4096
MAX_NAME = 256
# Notes are a page of text, not a document store: the web UI's request bodies stop at 64 KiB.
MAX_NOTES = 32 * 1024


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
    if request.HasField("notes"):
        if len(request.notes) > MAX_NOTES:
            raise PatchError(f"notes are longer than {MAX_NOTES} characters")
        out["notes"] = request.notes
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


# PatchExperimentRequest field -> where it lives in the config.
_RESOURCE_KNOBS = {"max_slots": "max_slots", "weight": "weight", "priority": "priority"}


def config_change(
    row: dict[str, Any],
    request: Any,
    max_name: int = MAX_NAME,
    held: ExperimentConfig | None = None,
) -> ExperimentConfig | None:
    """The experiment's config with the request's name, resources.* / checkpoint_storage.save_* values,
    checked as at creation, or None when the request changes none of them. `held`: the typed config
    the scheduler holds for a running experiment, changed without parsing it again; an ended one's is
    read from its stored row (`pedl.config.changes`)."""
    from pedl.config import ConfigError
    from pedl.config.changes import with_changes
    from pedl.config.stored import parse_stored_config

    knobs = [name for name in _RESOURCE_KNOBS if request.HasField(name)]
    renamed = request.HasField("name")
    if not knobs and not request.HasField("gc_policy") and not renamed:
        return None
    if knobs and row["state"] in ENDED:
        raise PatchError(
            f"experiment {row['id']} has ended ({row['state']}): "
            f"resources.{knobs[0]} matters only while it runs"
        )
    new_name = request.name.strip()
    if renamed and (not new_name or len(new_name) > max_name):
        raise PatchError(
            f"name must be 1-{max_name} characters, not blank (--max-name-length raises the limit)"
        )

    def change(sections: dict[str, Any]) -> None:
        if renamed:
            sections["name"] = new_name
        resources = sections.setdefault("resources", {})
        for name in knobs:
            value = getattr(request, name)
            if name == "max_slots" and value == 0:
                resources.pop("max_slots", None)  # `det e set max-slots ID none`: no cap
            else:
                resources[_RESOURCE_KNOBS[name]] = value
        if request.HasField("gc_policy"):
            storage = sections.setdefault("checkpoint_storage", {})
            for name in ("save_experiment_best", "save_trial_best", "save_trial_latest"):
                storage[name] = getattr(request.gc_policy, name)

    try:
        config = held if held is not None else parse_stored_config(json.loads(row["config_json"]))
        return with_changes(config, change)
    except ConfigError as e:
        raise PatchError(str(e)) from None
