"""Determined's project columns (`GET /api/v1/projects/{id}/columns`, GetProjectColumnsResponse):
what its experiment table can show, as its gateway emits them. Pure: the handler (`projects.py`)
gathers the experiments' hyperparameter spaces and metric names and passes them here.

Columns come in Determined's order: the experiment's own fields, then `hp.NAME` for each
hyperparameter (nested ones dotted, in the order first seen, names sorted within an experiment),
then for each stored metric `training.NAME.AGG` / `validation.NAME.AGG` with AGG one of min, max,
last and mean (the summary figures Determined keeps per metric).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

_EXPERIMENT = "LOCATION_TYPE_EXPERIMENT"
_TEXT, _NUMBER, _DATE, _UNSPECIFIED = (
    "COLUMN_TYPE_TEXT",
    "COLUMN_TYPE_NUMBER",
    "COLUMN_TYPE_DATE",
    "COLUMN_TYPE_UNSPECIFIED",
)
# (column, display name, type): the experiment fields Determined's table offers.
_EXPERIMENT_FIELDS = (
    ("id", "ID", _NUMBER),
    ("name", "Name", _TEXT),
    ("description", "Description", _TEXT),
    ("tags", "Tags", _TEXT),
    ("forkedFrom", "Forked", _NUMBER),
    ("startTime", "Start time", _DATE),
    ("duration", "Duration", _NUMBER),
    ("numTrials", "Trial count", _NUMBER),
    ("state", "State", _TEXT),
    ("searcherType", "Searcher type", _TEXT),
    ("resourcePool", "Resource pool", _TEXT),
    ("progress", "Progress", _NUMBER),
    ("checkpointSize", "Checkpoint size", _NUMBER),
    ("checkpointCount", "Checkpoint count", _NUMBER),
    ("user", "User", _TEXT),
)
_METRIC_LOCATION = {"training": "LOCATION_TYPE_TRAINING", "validation": "LOCATION_TYPE_VALIDATIONS"}
_AGGREGATES = ("min", "max", "last", "mean")


def _column(name: str, location: str, kind: str, display: str = "") -> dict[str, Any]:
    return {"column": name, "location": location, "type": kind, "displayName": display}


def _leaf_type(leaf: Mapping[str, Any]) -> str:
    """A number for int/double/log and numeric consts, text for string consts, else unspecified
    (categorical: its values may be of any type)."""
    kind = leaf.get("type")
    if kind in ("int", "double", "log"):
        return _NUMBER
    if kind == "const":
        value = leaf.get("val")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _NUMBER
        if isinstance(value, str):
            return _TEXT
    return _UNSPECIFIED


def _flat_hparams(space: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted name -> column type for each leaf of a normalized space (an empty mapping has none)."""
    out: dict[str, str] = {}
    for name, value in space.items():
        if not isinstance(value, Mapping):
            continue
        if "type" in value:
            out[prefix + name] = _leaf_type(value)
        else:
            out.update(_flat_hparams(value, f"{prefix}{name}."))
    return out


def project_columns(
    spaces: Iterable[Mapping[str, Any]], metric_names: Iterable[tuple[str, str]]
) -> list[dict[str, Any]]:
    """GetProjectColumnsResponse's `columns`: `spaces` are the experiments' normalized
    hyperparameter spaces (oldest experiment first), `metric_names` (group, name) pairs of what
    they stored; groups other than training and validation are left out."""
    columns = [_column(c, _EXPERIMENT, kind, display) for c, display, kind in _EXPERIMENT_FIELDS]
    seen: set[str] = set()
    for space in spaces:
        flat = _flat_hparams(space)
        for name in sorted(flat):
            if name not in seen:
                seen.add(name)
                columns.append(_column(f"hp.{name}", "LOCATION_TYPE_HYPERPARAMETERS", flat[name]))
    for group, name in sorted(set(metric_names)):
        location = _METRIC_LOCATION.get(group)
        if location is None:
            continue
        columns += [_column(f"{group}.{name}.{agg}", location, _NUMBER) for agg in _AGGREGATES]
    return columns
