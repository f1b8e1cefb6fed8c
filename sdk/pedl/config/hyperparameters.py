"""Hyperparameter spaces: validation/normalization, random sampling and grid enumeration.

A space maps names to either a leaf (`{type: const|int|double|log|categorical, ...}`; a bare value
is const shorthand) or a nested group (a mapping without a `type` key). Sampled values mirror the
nesting. Iteration follows the config's key order, so results are deterministic for a given rng.
"""

from __future__ import annotations

import copy
import itertools
import random
from typing import Any

from pedl.config.errors import FieldError, FieldPath

HP_TYPES = ("const", "int", "double", "log", "categorical")


def normalize_space(space: Any, path: FieldPath = ("hyperparameters",)) -> dict[str, Any]:
    """A copy where every leaf is an explicit `{type: ..., ...}` mapping (bare values become const).

    The leaves' types and bounds are the schema's (pedl.config.schema_parts); this checks only what it
    cannot state, `minval < maxval`."""
    if space is None:
        return {}
    out: dict[str, Any] = {}
    for name, value in space.items():
        child = (*path, name)
        if isinstance(value, dict) and "type" in value:
            out[name] = _normalize_leaf(value, child)
        elif isinstance(value, dict):
            out[name] = normalize_space(value, child)
        else:
            out[name] = {"type": "const", "val": copy.deepcopy(value)}
    return out


def _normalize_leaf(leaf: dict[str, Any], path: FieldPath) -> dict[str, Any]:
    out = copy.deepcopy(leaf)
    kind = leaf["type"]
    if kind in ("int", "double", "log"):
        lo, hi = leaf["minval"], leaf["maxval"]
        if not lo < hi:
            raise FieldError((*path, "minval"), f"must be less than maxval ({lo} >= {hi})")
    if kind == "log":
        out.setdefault("base", 10)  # Determined's schema allows any positive base
    return out


def check_grid(space: dict[str, Any], path: FieldPath = ("hyperparameters",)) -> None:
    """Grid search needs `count` on every int/double/log hyperparameter."""
    for name, value in normalize_space(space, path).items():
        child = (*path, name)
        if "type" not in value or not isinstance(value["type"], str):
            check_grid(value, child)
        elif value["type"] in ("int", "double", "log") and "count" not in value:
            raise FieldError((*path, name), f"grid search needs 'count' on a {value['type']} hyperparameter")


def _is_leaf(value: dict[str, Any]) -> bool:
    return "type" in value and isinstance(value["type"], str) and value["type"] in HP_TYPES


def sample(space: dict[str, Any], rng: random.Random, *, normalized: bool = False) -> dict[str, Any]:
    """One random point: int in [minval, maxval], double uniform, log base**uniform, categorical choice.

    `normalized`: `space` is already `normalize_space`'s output (searchers sample thousands of points).
    """
    out: dict[str, Any] = {}
    for name, value in (space if normalized else normalize_space(space)).items():
        out[name] = _sample_leaf(value, rng) if _is_leaf(value) else sample(value, rng, normalized=True)
    return out


def _sample_leaf(leaf: dict[str, Any], rng: random.Random) -> Any:
    kind = leaf["type"]
    if kind == "const":
        return copy.deepcopy(leaf["val"])
    if kind == "int":
        return rng.randint(leaf["minval"], leaf["maxval"])
    if kind == "double":
        return rng.uniform(leaf["minval"], leaf["maxval"])
    if kind == "log":
        return float(leaf["base"]) ** rng.uniform(leaf["minval"], leaf["maxval"])
    return copy.deepcopy(rng.choice(leaf["vals"]))


def grid(space: dict[str, Any]) -> list[dict[str, Any]]:
    """Every point of the grid (cartesian product over leaves, in config order)."""
    normalized = normalize_space(space)
    check_grid(normalized)
    leaves: list[tuple[tuple[str, ...], list[Any]]] = []
    _collect_axes(normalized, (), leaves)
    points: list[dict[str, Any]] = []
    for combo in itertools.product(*(axis for _, axis in leaves)):
        point: dict[str, Any] = _empty_groups(normalized)
        for (keys, _), value in zip(leaves, combo, strict=True):
            target = point
            for key in keys[:-1]:
                target = target[key]
            target[keys[-1]] = copy.deepcopy(value)
        points.append(point)
    return points


def _empty_groups(space: dict[str, Any]) -> dict[str, Any]:
    return {name: _empty_groups(value) for name, value in space.items() if not _is_leaf(value)}


def _collect_axes(
    space: dict[str, Any], prefix: tuple[str, ...], out: list[tuple[tuple[str, ...], list[Any]]]
) -> None:
    for name, value in space.items():
        if _is_leaf(value):
            out.append(((*prefix, name), grid_axis(value)))
        else:
            _collect_axes(value, (*prefix, name), out)


def grid_axis(leaf: dict[str, Any]) -> list[Any]:
    """The values one leaf takes in a grid: `count` evenly spaced points (1 point = the midpoint)."""
    kind = leaf["type"]
    if kind == "const":
        return [leaf["val"]]
    if kind == "categorical":
        return list(leaf["vals"])
    lo, hi, count = leaf["minval"], leaf["maxval"], leaf["count"]
    if kind == "int":
        count = min(count, hi - lo + 1)
        if count == 1:
            return [(lo + hi) // 2]
        return sorted({int(round(lo + i * (hi - lo) / (count - 1))) for i in range(count)})
    points = [(lo + hi) / 2] if count == 1 else [lo + i * (hi - lo) / (count - 1) for i in range(count)]
    if kind == "log":
        return [float(leaf["base"]) ** p for p in points]
    return [float(p) for p in points]


def const_value(space: dict[str, Any], name: str) -> Any | None:
    """The value of a top-level const hyperparameter (bare or `{type: const}`), else None."""
    if name not in space:
        return None
    value = space[name]
    if isinstance(value, dict):
        return value.get("val") if value.get("type") == "const" else None
    return value


__all__ = ["normalize_space", "check_grid", "sample", "grid", "grid_axis", "const_value"]
