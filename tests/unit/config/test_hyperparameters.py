"""Hyperparameter spaces: validation, sampling and grids as a searcher uses them."""

from __future__ import annotations

import random

import pytest

from pedl.config import ConfigError, parse_experiment_config
from pedl.config.errors import FieldError
from pedl.config.hyperparameters import grid, normalize_space, sample

SPACE = {
    "global_batch_size": 32,
    "lr": {"type": "log", "minval": -4, "maxval": -1},
    "layers": {"type": "int", "minval": 1, "maxval": 3},
    "dropout": {"type": "double", "minval": 0.1, "maxval": 0.5},
    "optimizer": {"type": "categorical", "vals": ["sgd", "adam"]},
    "arch": {"width": {"type": "int", "minval": 8, "maxval": 16}, "act": "relu"},
    "sizes": [1, 2, 3],
}


def test_normalize_makes_every_leaf_explicit() -> None:
    space = normalize_space(SPACE)
    assert space["global_batch_size"] == {"type": "const", "val": 32}
    assert space["lr"]["base"] == 10
    assert space["arch"]["act"] == {"type": "const", "val": "relu"}
    assert space["sizes"] == {"type": "const", "val": [1, 2, 3]}
    assert normalize_space(space) == space


def test_sample_ranges_types_and_nesting() -> None:
    rng = random.Random(0)
    for _ in range(200):
        point = sample(SPACE, rng)
        assert point["global_batch_size"] == 32 and point["sizes"] == [1, 2, 3]
        assert 1e-4 <= point["lr"] <= 1e-1
        assert isinstance(point["layers"], int) and 1 <= point["layers"] <= 3
        assert 0.1 <= point["dropout"] <= 0.5
        assert point["optimizer"] in ("sgd", "adam")
        assert 8 <= point["arch"]["width"] <= 16 and point["arch"]["act"] == "relu"


def test_sample_is_deterministic_given_the_rng() -> None:
    assert sample(SPACE, random.Random(7)) == sample(SPACE, random.Random(7))
    seen = {sample(SPACE, random.Random(s))["layers"] for s in range(50)}
    assert seen == {1, 2, 3}


def test_sample_does_not_share_mutable_consts() -> None:
    first = sample(SPACE, random.Random(1))
    first["sizes"].append(4)
    assert sample(SPACE, random.Random(1))["sizes"] == [1, 2, 3]


def test_grid_is_the_product_of_axes() -> None:
    space = {
        "lr": {"type": "log", "minval": -3, "maxval": -1, "count": 3},
        "layers": {"type": "int", "minval": 1, "maxval": 10, "count": 2},
        "opt": {"type": "categorical", "vals": ["a", "b"]},
        "nested": {"d": {"type": "double", "minval": 0, "maxval": 1, "count": 1}, "c": 5},
    }
    points = grid(space)
    assert len(points) == 3 * 2 * 2
    assert sorted({round(p["lr"], 6) for p in points}) == [0.001, 0.01, 0.1]
    assert {p["layers"] for p in points} == {1, 10}
    assert all(p["nested"] == {"d": 0.5, "c": 5} for p in points)
    assert len({(p["lr"], p["layers"], p["opt"]) for p in points}) == 12


def test_int_grid_count_larger_than_range_gives_each_value_once() -> None:
    assert [p["n"] for p in grid({"n": {"type": "int", "minval": 1, "maxval": 3, "count": 10}})] == [1, 2, 3]


def test_grid_of_empty_space_is_one_empty_point() -> None:
    assert grid({}) == [{}]


def test_grid_without_count_is_an_error_naming_the_hyperparameter() -> None:
    with pytest.raises(FieldError) as err:
        grid({"lr": {"type": "double", "minval": 0, "maxval": 1}})
    assert err.value.path == ("hyperparameters", "lr")


@pytest.mark.parametrize(
    ("leaf", "path", "fragment"),
    [
        ("{type: int, minval: 5, maxval: 5}", "hyperparameters.x.minval", "less than maxval"),
        ("{type: int, minval: 1.5, maxval: 5}", "hyperparameters.x.minval", "integer"),
        ("{type: double, minval: 1}", "hyperparameters.x.maxval", "required"),
        ("{type: log, minval: 1, maxval: 2, base: 0}", "hyperparameters.x.base", "greater than 0"),
        ("{type: categorical, vals: []}", "hyperparameters.x.vals", "at least one"),
        ("{type: categorical, vals: 3}", "hyperparameters.x.vals", "expected a list"),
        ("{type: const}", "hyperparameters.x.val", "required"),
        ("{type: float, minval: 1, maxval: 2}", "hyperparameters.x.type", "unknown hyperparameter type"),
        ("{type: int, minval: 1, maxval: 2, step: 1}", "hyperparameters.x.step", "unknown key"),
        ("{type: int, minval: 1, maxval: 2, count: 0}", "hyperparameters.x.count", "at least 1"),
    ],
)
def test_invalid_leaves_rejected_with_path_and_line(leaf: str, path: str, fragment: str) -> None:
    text = f"searcher: {{name: single, metric: m, max_length: 1}}\nhyperparameters:\n  x: {leaf}\n"
    with pytest.raises(ConfigError) as err:
        parse_experiment_config(text)
    assert err.value.path == path and fragment in err.value.message and err.value.line == 3


def test_nested_group_error_path() -> None:
    text = (
        "searcher: {name: single, metric: m, max_length: 1}\n"
        "hyperparameters:\n  arch:\n    depth:\n      type: int\n      minval: 9\n      maxval: 2\n"
    )
    with pytest.raises(ConfigError) as err:
        parse_experiment_config(text)
    assert err.value.path == "hyperparameters.arch.depth.minval" and err.value.line == 6
