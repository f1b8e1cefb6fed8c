"""Keras validation metrics under Keras's names (`val_loss`, `val_accuracy`), and what a config
written for pedl's earlier unprefixed names gets: the value under both names and one warning line."""

from __future__ import annotations

import pytest

from pedl import _trial_context
from pedl.keras import _names


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    _names._warned.clear()


def _with_metric(metric: str | None) -> None:
    config = {"searcher": {"name": "single", "metric": metric}} if metric else None
    _trial_context.set_experiment_config(config)


def test_validation_metrics_are_named_as_keras_names_them() -> None:
    _with_metric("val_accuracy")
    assert _names.keras_validation_metrics({"loss": 0.5, "accuracy": 0.9}) == {
        "val_loss": 0.5,
        "val_accuracy": 0.9,
    }


def test_a_config_naming_the_old_metric_gets_it_under_both_names_and_one_warning(capsys) -> None:
    _with_metric("accuracy")
    first = _names.keras_validation_metrics({"loss": 0.5, "accuracy": 0.9})
    again = _names.keras_validation_metrics({"loss": 0.4, "accuracy": 0.95})
    assert first == {"val_loss": 0.5, "val_accuracy": 0.9, "accuracy": 0.9}
    assert again["accuracy"] == 0.95
    warning = capsys.readouterr().err.strip().splitlines()
    assert warning == [
        "pedl: searcher.metric 'accuracy' is the Keras validation metric 'val_accuracy'; reporting it "
        "under both names (write `metric: val_accuracy`, as Keras and Determined name it)"
    ]


@pytest.mark.parametrize("metric", ["val_acc", "acc"])
def test_a_config_naming_keras_before_2_3s_acc_gets_val_accuracy_under_that_name(capsys, metric) -> None:
    _with_metric(metric)
    assert _names.keras_validation_metrics({"loss": 0.5, "accuracy": 0.9}) == {
        "val_loss": 0.5,
        "val_accuracy": 0.9,
        metric: 0.9,
    }
    assert (
        f"searcher.metric '{metric}' is the Keras validation metric 'val_accuracy'" in capsys.readouterr().err
    )


def test_outside_a_trial_only_the_keras_names_are_reported() -> None:
    _with_metric(None)
    assert _names.keras_validation_metrics({"val_loss": 1.0}) == {"val_loss": 1.0}
