"""Searcher configs of today's Determined for Core API scripts: no length (the script decides),
ASHA on a `time_metric` up to `max_time`, and what only a Trial class or only a script can do."""

from __future__ import annotations

import pytest

from pedl.config import ConfigError, parse_experiment_config


def parse(text: str):
    return parse_experiment_config(text)


def test_determined_stage_0_config_parses_unchanged() -> None:
    config = parse(
        "name: core-api-stage-0\nentrypoint: python3 0_start.py\nsearcher:\n  name: single\n  metric: x\n"
        "max_restarts: 0\n"
    )
    assert config.max_length_batches == 0  # the script decides when it is done
    assert config.entrypoint_spec.command == ("python3", "0_start.py")


def test_determined_hpsearch_stage_config_parses_unchanged() -> None:
    config = parse(
        "name: core-api-stage-3\nentrypoint: python3 3_hpsearch.py\n"
        "hyperparameters:\n  increment_by:\n    type: int\n    minval: 1\n    maxval: 8\n"
        "searcher:\n   name: adaptive_asha\n   metric: x\n   max_trials: 10\n"
        "   time_metric: batches\n   max_time: 100\nmax_restarts: 0\n"
    )
    assert config.max_length_batches == 100
    assert config.searcher["time_metric"] == "batches"


@pytest.mark.parametrize("name", ["random", "grid"])
def test_random_and_grid_scripts_need_no_length(name) -> None:
    extra = "  max_trials: 2\n" if name == "random" else ""
    hp = "hyperparameters:\n  a: {type: categorical, vals: [1, 2]}\n"
    config = parse(f"entrypoint: python3 train.py\n{hp}searcher:\n  name: {name}\n  metric: x\n{extra}")
    assert config.max_length_batches == 0


def test_a_list_entrypoint_is_a_command() -> None:
    config = parse("entrypoint: [python3, train.py, --epochs, '1']\nsearcher: {name: single, metric: x}\n")
    assert config.entrypoint_spec.command == ("python3", "train.py", "--epochs", "1")


def errors(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text)
    return str(info.value)


def test_a_trial_class_still_needs_a_length() -> None:
    message = errors("entrypoint: model_def:MyTrial\nsearcher: {name: single, metric: x}\n")
    assert "searcher.max_length" in message and "unless the entrypoint is a command" in message


def test_time_metric_needs_max_time_and_the_other_way_round() -> None:
    base = "entrypoint: python3 t.py\nsearcher: {name: adaptive_asha, metric: x, max_trials: 4, %s}\n"
    assert "searcher.max_time: is required with searcher.time_metric" in errors(base % "time_metric: batches")
    assert "searcher.time_metric: is required with searcher.max_time" in errors(base % "max_time: 10")
    message = errors(base % "time_metric: batches, max_time: 10, max_length: 10")
    assert "searcher.max_length" in message and "not both" in message
    assert "searcher.max_time" in errors(base % "time_metric: batches, max_time: 0")


def test_time_metric_is_for_asha_only() -> None:
    message = errors("entrypoint: python3 t.py\nsearcher: {name: single, metric: x, time_metric: batches}\n")
    assert "searcher.time_metric" in message


def test_a_trial_class_is_measured_in_batches_or_epochs_and_another_metric_needs_a_script() -> None:
    # Determined 0.38's ASHA asks for time_metric/max_time; its loops report batches and epochs.
    trial = "entrypoint: model_def:MyTrial\nsearcher: {name: adaptive_asha, metric: x, max_trials: 4, %s}\n"
    config = parse(trial % "time_metric: batches, max_time: 10")
    assert (config.max_length_batches, config.length_unit) == (10, "batches")
    config = parse(trial % "time_metric: epochs, max_time: 2")
    assert (config.max_length, config.length_unit) == (2, "epochs")
    message = errors(trial % "time_metric: accuracy, max_time: 10")
    assert "searcher.time_metric: a Trial class is measured in batches or epochs" in message
    assert "needs a command entrypoint" in message


def test_searchers_that_need_checkpoints_on_request_refuse_a_script() -> None:
    message = errors(
        "entrypoint: python3 t.py\nhyperparameters: {a: {type: double, minval: 0, maxval: 1}}\n"
        "searcher:\n  name: pbt\n  metric: x\n  population_size: 2\n  num_rounds: 2\n"
        "  length_per_round: {batches: 10}\n  replace_function: {truncate_fraction: 0.5}\n"
        "  explore_function: {resample_probability: 0.5, perturb_factor: 0.2}\n"
    )
    assert "searcher.name: the pbt searcher needs checkpoints on request" in message


def test_min_checkpoint_period_is_refused_for_a_script() -> None:
    message = errors(
        "entrypoint: python3 t.py\nsearcher: {name: single, metric: x}\n"
        "min_checkpoint_period: {batches: 10}\n"
    )
    assert "min_checkpoint_period: is not available with a command entrypoint" in message
