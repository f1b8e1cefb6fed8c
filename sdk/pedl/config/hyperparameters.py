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

from pedl.config._checks import check_keys, describe, expect_int, expect_list, expect_number
from pedl.config.errors import FieldError, FieldPath

HP_TYPES = ("const", "int", "double", "log", "categorical")
_LEAF_KEYS: dict[str, tuple[str, ...]] = {
    "const": ("type", "val"),
    "int": ("type", "minval", "maxval", "count"),
    "double": ("type", "minval", "maxval", "count"),
    "log": ("type", "minval", "maxval", "base", "count"),
    "categorical": ("type", "vals"),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "const": ("val",),
    "int": ("minval", "maxval"),
    "double": ("minval", "maxval"),
    "log": ("minval", "maxval"),
    "categorical": ("vals",),
}


def normalize_space(space: Any, path: FieldPath = ("hyperparameters",)) -> dict[str, Any]:
    """Validate `space` and return a copy where every leaf is an explicit `{type: ..., ...}` mapping."""
    if space is None:
        return {}
    if not isinstance(space, dict):
        raise FieldError(path, f"expected a mapping of hyperparameter names, got {describe(space)}")
    out: dict[str, Any] = {}
    for name, value in space.items():
        if not isinstance(name, str):
            raise FieldError(
                (*path, str(name)), f"hyperparameter names must be strings, got {describe(name)}"
            )
        child = (*path, name)
        if isinstance(value, dict) and "type" in value:
            out[name] = _normalize_leaf(value, child)
        elif isinstance(value, dict):
            out[name] = normalize_space(value, child)
        else:
            out[name] = {"type": "const", "val": copy.deepcopy(value)}
    return out


def _normalize_leaf(leaf: dict[str, Any], path: FieldPath) -> dict[str, Any]:
    kind = leaf["type"]
    if kind not in HP_TYPES:
        raise FieldError(
            (*path, "type"),
            f"unknown hyperparameter type {describe(kind)}; expected one of {', '.join(HP_TYPES)}",
        )
    check_keys(
        leaf, path, _LEAF_KEYS[kind], required=_REQUIRED[kind], what=f"key for a {kind} hyperparameter"
    )
    out = copy.deepcopy(leaf)
    if kind == "categorical":
        vals = expect_list(leaf["vals"], (*path, "vals"))
        if not vals:
            raise FieldError((*path, "vals"), "must list at least one value")
        return out
    if kind == "const":
        return out
    lo: float
    hi: float
    if kind == "int":
        lo = expect_int(leaf["minval"], (*path, "minval"))
        hi = expect_int(leaf["maxval"], (*path, "maxval"))
    else:
        lo = expect_number(leaf["minval"], (*path, "minval"))
        hi = expect_number(leaf["maxval"], (*path, "maxval"))
    if not lo < hi:
        raise FieldError((*path, "minval"), f"must be less than maxval ({lo} >= {hi})")
    if "count" in leaf:
        expect_int(leaf["count"], (*path, "count"), minimum=1)
    if kind == "log":
        # Determined's schema allows any positive base; base 1 gives 1.0 for every trial.
        out["base"] = expect_number(leaf.get("base", 10), (*path, "base"), exclusive_minimum=0)
    return out


def validate_space(space: Any) -> None:
    """Raise FieldError if `space` is not a valid hyperparameter space."""
    normalize_space(space)


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


__all__ = ["normalize_space", "validate_space", "check_grid", "sample", "grid", "grid_axis", "const_value"]
