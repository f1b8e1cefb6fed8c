"""Hyperparameter importance on synthetic searches whose answer the function defines."""

from __future__ import annotations

import random

import pytest

from pedl.importance import Observation, importances, log_scaled_names


def search(n: int, metric, seed: int = 0) -> list[Observation]:  # noqa: ANN001
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        hp = {"x": rng.uniform(0, 1), "y": rng.uniform(0, 1), "opt": rng.choice(["sgd", "adam", "rms"])}
        out.append(Observation(hp, metric(hp) + rng.gauss(0, 0.01)))
    return out


def test_a_metric_made_of_10x_plus_a_tenth_of_y_ranks_x_first() -> None:
    ranked = importances(search(300, lambda h: 10 * h["x"] + 0.1 * h["y"]), smaller_is_better=True)
    assert ranked[0].name == "x" and ranked[0].importance > 0.5
    assert sum(i.importance for i in ranked) == pytest.approx(1.0)
    assert {i.name for i in ranked} == {"x", "y", "opt"}


def test_a_categorical_that_alone_decides_the_metric_ranks_first_when_larger_is_better() -> None:
    score = {"sgd": 0.0, "adam": 1.0, "rms": 0.5}
    ranked = importances(search(300, lambda h: score[h["opt"]] + 0.01 * h["y"]), smaller_is_better=False)
    assert ranked[0].name == "opt"


def test_too_few_trials_or_nothing_varying_gives_no_answer_and_nan_metrics_are_left_out() -> None:
    assert importances(search(3, lambda h: h["x"]), smaller_is_better=True) == []
    same = [Observation({"lr": 0.1}, float(i)) for i in range(10)]
    assert importances(same, smaller_is_better=True) == []
    nan = [Observation({"x": float(i)}, float("nan")) for i in range(10)]
    assert importances(nan, smaller_is_better=True) == []


def test_log_scaled_names_come_from_the_configs_space_nested_or_not() -> None:
    space = {
        "lr": {"type": "log", "minval": -4, "maxval": -1},
        "model": {"width": {"type": "int"}, "decay": {"type": "log"}},
    }
    assert log_scaled_names(space) == {"lr", "model.decay"}
