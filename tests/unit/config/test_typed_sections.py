"""The config's sections as typed values, built once where the config is parsed and the same after
the config travels (`carried`): what the scheduler's searchers, GC and placement and the agent read."""

from __future__ import annotations

from pedl.config import carried, parse_experiment_config
from pedl.config.changes import with_changes
from pedl.config.environment_settings import Environment
from pedl.config.searcher_settings import SearcherSettings
from pedl.config.storage_settings import CheckpointStorage

BASE = """
hyperparameters:
  lr: {type: double, minval: 0.001, maxval: 0.1}
"""


def test_searcher_is_typed_with_the_defaults_filled_once() -> None:
    config = parse_experiment_config(
        BASE + "searcher: {name: adaptive_asha, metric: acc, smaller_is_better: false, max_trials: 8, "
        "max_length: {epochs: 3}}\nrecords_per_epoch: 100\n"
    )
    searcher = config.searcher
    assert isinstance(searcher, SearcherSettings)
    assert (searcher.name, searcher.metric, searcher.smaller_is_better) == ("adaptive_asha", "acc", False)
    assert (searcher.max_trials, searcher.max_concurrent_trials) == (8, 16)
    assert (searcher.mode, searcher.divisor, searcher.max_rungs, searcher.stop_once) == (
        "standard",
        4.0,
        5,
        False,
    )
    assert searcher.written_length_unit == "epochs" and config.script_length_unit == "epochs"
    assert searcher == config.raw["searcher"]  # a read-only view of the section as written
    assert searcher.time_metric is None and searcher.source_trial_id is None


def test_pbt_and_warm_start_fields_are_typed() -> None:
    config = parse_experiment_config(
        BASE
        + """searcher:
  name: pbt
  metric: loss
  population_size: 4
  num_rounds: 3
  length_per_round: 10
  source_trial_id: 7
  replace_function: {truncate_fraction: 0.25}
  explore_function: {resample_probability: 0.5, perturb_factor: 0.2}
"""
    )
    s = config.searcher
    assert (s.population_size, s.num_rounds, s.max_trials, s.source_trial_id) == (4, 3, None, 7)
    assert (s.truncate_fraction, s.resample_probability, s.perturb_factor) == (0.25, 0.5, 0.2)


def test_the_carried_config_has_the_same_typed_sections() -> None:
    config = parse_experiment_config(
        BASE + "searcher: {name: random, metric: loss, max_trials: 3, max_length: 10}\n"
    )
    again = carried.carried(config)
    assert again.searcher == config.searcher and again.searcher.max_trials == 3


def test_checkpoint_storage_is_typed_and_a_gc_policy_change_rebuilds_only_it() -> None:
    config = parse_experiment_config(
        BASE + "searcher: {name: single, metric: loss, max_length: 10}\n"
        "checkpoint_storage: {type: shared_fs, host_path: /tmp/ck, save_trial_best: 2}\n"
    )
    storage = config.checkpoint_storage
    assert isinstance(storage, CheckpointStorage)
    assert (storage.type, storage.host_path, storage.storage_path) == ("shared_fs", "/tmp/ck", None)
    assert (storage.save_experiment_best, storage.save_trial_best, storage.save_trial_latest) == (0, 2, 1)
    assert storage.wire() == config.raw["checkpoint_storage"]  # what the checkpoint store receives
    changed = with_changes(config, lambda s: s["checkpoint_storage"].update(save_trial_latest=4))
    assert (
        changed.checkpoint_storage.save_trial_latest == 4 and config.checkpoint_storage.save_trial_latest == 1
    )
    assert changed.searcher is config.searcher
    assert carried.carried(changed).checkpoint_storage.save_trial_latest == 4


def test_without_checkpoint_storage_the_store_decides_and_the_defaults_hold() -> None:
    config = parse_experiment_config(BASE + "searcher: {name: single, metric: loss, max_length: 10}\n")
    storage = config.checkpoint_storage
    assert storage.type is None and (storage.save_trial_best, storage.save_trial_latest) == (1, 1)


def test_environment_is_typed_from_either_form() -> None:
    searcher = "searcher: {name: single, metric: loss, max_length: 10}\n"
    by_device = parse_experiment_config(
        BASE + searcher + "environment:\n  name: tf\n  environment_variables:\n"
        "    cpu: [WHERE=cpu, A=1]\n    cuda: [WHERE=cuda]\n    gpu: [B=2]\n"
    )
    env = by_device.environment
    assert isinstance(env, Environment) and env.name == "tf" == by_device.environment_name
    assert env.variables(gpu=False) == {"WHERE": "cpu", "A": "1"}
    assert env.variables(gpu=True) == {"WHERE": "cuda", "B": "2"}
    listed = parse_experiment_config(
        BASE + searcher + "environment: {python: /usr/bin/python3, environment_variables: [X=1, X=2]}\n"
    ).environment
    assert listed.name == "/usr/bin/python3" and listed.variables(gpu=True) == listed.variables(
        gpu=False
    ) == {"X": "2"}
    named = parse_experiment_config(BASE + searcher + "environment: torch-2\n").environment
    assert named == Environment(name="torch-2") and named.variables(gpu=False) == {}
    assert parse_experiment_config(BASE + searcher).environment == Environment()
    assert carried.carried(by_device).environment == env
