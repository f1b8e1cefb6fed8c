"""Parsing experiment configs: Determined and PEDL formats, defaults, and errors with lines."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pedl.config import ConfigError, ExperimentConfig, parse_experiment_config

DETERMINED = textwrap.dedent(
    """\
    name: mnist_pytorch
    description: MNIST with PyTorch
    labels: [mnist, tutorial]
    data:
      url: https://example.com/mnist.tar.gz
    hyperparameters:
      global_batch_size: 64
      learning_rate:
        type: log
        minval: -4
        maxval: -1
      n_filters1:
        type: int
        minval: 8
        maxval: 64
      dropout:
        type: double
        minval: 0.2
        maxval: 0.5
      optimizer:
        type: categorical
        vals: [sgd, adam]
    searcher:
      name: adaptive_asha
      metric: validation_loss
      smaller_is_better: true
      max_trials: 16
      max_length:
        batches: 937
    records_per_epoch: 60000
    min_validation_period:
      batches: 100
    resources:
      slots_per_trial: 2
    environment:
      image: determinedai/environments:py-3.8-pytorch-1.9-cpu
      environment_variables:
        - AWS_SECRET_ACCESS_KEY=abc123
    checkpoint_storage:
      type: s3
      bucket: my-bucket
      access_key: AKIA
      secret_key: topsecret
      save_trial_best: 2
    entrypoint: model_def:MNistTrial
    reproducibility:
      experiment_seed: 42
    """
)

PEDL = textwrap.dedent(
    """\
    description: cifar10 old style
    hyperparameters:
      batch_size: 32
      lr: {type: const, val: 0.01}
    searcher:
      name: single
      metric: error
      max_steps: 10
    batches_per_step: 50
    min_checkpoint_period: 200
    """
)


def parse(text: str) -> ExperimentConfig:
    return parse_experiment_config(text, filename="config.yaml")


def error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        parse(text)
    return err.value


def test_determined_config_accepted_with_typed_values() -> None:
    c = parse(DETERMINED)
    assert c.description == "MNIST with PyTorch"
    assert c.searcher_name == "adaptive_asha" and c.searcher_metric == "validation_loss"
    assert c.smaller_is_better is True
    assert c.max_length_batches == 937
    assert c.min_validation_period_batches == 100 and c.min_checkpoint_period_batches == 0
    assert c.slots_per_trial == 2 and c.max_restarts == 5 and c.batches_per_step == 100
    assert c.experiment_seed == 42 and c.records_per_epoch == 60000
    assert c.entrypoint_spec is not None and c.entrypoint_spec.object_ref == "MNistTrial"
    assert c.checkpoint_storage["save_trial_best"] == 2 and c.checkpoint_storage["save_trial_latest"] == 1
    assert c.searcher["divisor"] == 4 and c.searcher["mode"] == "standard"
    assert c.data["url"].startswith("https://")


def test_pedl_config_accepted_steps_converted() -> None:
    c = parse(PEDL)
    assert c.max_length_batches == 500
    assert c.min_checkpoint_period_batches == 200 * 50  # a bare int counts PEDL steps
    assert c.hyperparameters["batch_size"] == {"type": "const", "val": 32}
    assert c.data == {} and c.raw["data"] == {}
    assert c.entrypoint_spec is None and c.environment_name is None and c.experiment_seed is None


def test_raw_is_json_and_reparses_to_the_same_config(tmp_path: Path) -> None:
    c = parse(DETERMINED)
    again = parse_experiment_config(json.loads(json.dumps(c.raw)))
    assert again.raw == c.raw
    assert again.max_length_batches == c.max_length_batches
    path = tmp_path / "exp.yaml"
    path.write_text(DETERMINED)
    assert parse_experiment_config(str(path)).raw == c.raw
    assert parse_experiment_config(path).raw == c.raw
    assert parse_experiment_config(DETERMINED.encode()).raw == c.raw


def test_input_dict_not_modified() -> None:
    source = {"searcher": {"name": "single", "metric": "loss", "max_length": 10}}
    parse_experiment_config(source)
    assert source == {"searcher": {"name": "single", "metric": "loss", "max_length": 10}}


def test_error_has_file_line_and_field_path() -> None:
    err = error(PEDL.replace("max_steps: 10", "max_steps: ten"))
    assert str(err) == "config.yaml, line 8: searcher.max_steps: expected an integer, got 'ten'"
    assert err.path == "searcher.max_steps" and err.line == 8 and isinstance(err, ValueError)


def test_error_in_nested_hyperparameter_points_at_its_line() -> None:
    err = error(DETERMINED.replace("minval: -4", "minval: 0"))
    assert err.path == "hyperparameters.learning_rate.minval" and err.line == 10
    assert "less than maxval" in err.message


def test_missing_required_field_points_at_parent_line() -> None:
    err = error(PEDL.replace("  metric: error\n", ""))
    assert err.path == "searcher.metric" and err.line == 5 and "required" in err.message


def test_unknown_top_level_field_suggests_closest() -> None:
    err = error(PEDL + "hyperparameter:\n  x: 1\n")
    assert err.path == "hyperparameter" and "did you mean 'hyperparameters'" in err.message
    assert err.line == 11


def test_dict_errors_have_no_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_experiment_config({"searcher": {"name": "single", "metric": "m", "max_length": "x"}})
    assert err.value.line is None and err.value.path == "searcher.max_length"


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("a: [1, 2\nb: 3\n", 2, "not valid YAML"),
        ("- 1\n- 2\n", 1, "must be a mapping"),
        ("", None, "empty"),
        ("searcher: {name: single\n", 2, "not valid YAML"),
    ],
)
def test_not_yaml_or_not_a_mapping(text: str, line: int | None, fragment: str) -> None:
    err = error(text)
    assert fragment in err.message and err.line == line


def test_searcher_required() -> None:
    assert error("description: x\n").path == "searcher"


@pytest.mark.parametrize(
    ("searcher", "path", "fragment"),
    [
        ("{name: bayes, metric: m, max_length: 1}", "searcher.name", "expected one of"),
        ("{name: random, metric: m, max_length: 1}", "searcher.max_trials", "required"),
        ("{name: single, metric: m}", "searcher.max_length", "required"),
        ("{name: single, metric: m, max_length: 1, max_steps: 1}", "searcher.max_steps", "only one"),
        ("{name: single, metric: m, max_length: {bathces: 3}}", "searcher.max_length", "batches, records"),
        ("{name: single, metric: m, max_length: 0}", "searcher.max_length", "at least 1"),
        ("{name: single, metric: m, max_length: 5, max_trials: 3}", "searcher.max_trials", "unknown field"),
        (
            "{name: adaptive_asha, metric: m, max_length: 5, max_trials: 3, mode: wild}",
            "searcher.mode",
            "one of",
        ),
        (
            "{name: adaptive_asha, metric: m, max_length: 5, max_trials: 3, divisor: 1}",
            "searcher.divisor",
            "greater",
        ),
        ("{name: adaptive, metric: m, target_trial_steps: 5}", "searcher.budget", "required"),
        (
            "{name: pbt, metric: m, population_size: 4, num_rounds: 2, length_per_round: 10,"
            " replace_function: {truncate_fraction: 0.9},"
            " explore_function: {resample_probability: 0.2, perturb_factor: 0.2}}",
            "searcher.replace_function.truncate_fraction",
            "at most 0.5",
        ),
        ("{name: single, metric: 3, max_length: 1}", "searcher.metric", "expected a string"),
        (
            "{name: single, metric: m, max_length: 1, smaller_is_better: yes please}",
            "searcher.smaller_is_better",
            "true or false",
        ),
    ],
)
def test_searcher_errors(searcher: str, path: str, fragment: str) -> None:
    err = error(f"searcher: {searcher}\n")
    assert err.path == path and fragment in err.message


def test_other_searchers_and_their_lengths() -> None:
    pbt = parse(
        "batches_per_step: 10\n"
        "searcher: {name: pbt, metric: m, population_size: 4, num_rounds: 3, steps_per_round: 5,"
        " replace_function: {truncate_fraction: 0.5},"
        " explore_function: {resample_probability: 0.2, perturb_factor: 0.1}}\n"
    )
    assert pbt.max_length_batches == 50
    adaptive = parse("searcher: {name: adaptive, metric: m, target_trial_steps: 2, step_budget: 30}\n")
    assert adaptive.max_length_batches == 200 and adaptive.budget_batches == 3000
    assert adaptive.searcher["train_stragglers"] is True
    rand = parse(
        "searcher: {name: random, metric: m, max_trials: 5, max_length: 7, smaller_is_better: false}\n"
    )
    assert rand.smaller_is_better is False and rand.searcher["max_concurrent_trials"] == 16


def test_records_and_epochs_convert_with_const_global_batch_size() -> None:
    base = "hyperparameters: {global_batch_size: 32}\nrecords_per_epoch: 1000\n"
    c = parse(base + "searcher: {name: single, metric: m, max_length: {epochs: 2}}\n")
    assert c.max_length_batches == 63  # 2000 records / 32, a partial batch counts
    c = parse(
        base + "searcher: {name: single, metric: m, max_length: {records: 64}}\n"
        "min_validation_period: {epochs: 1}\n"
    )
    assert c.max_length_batches == 2 and c.min_validation_period_batches == 32


def test_records_need_an_integer_global_batch_size() -> None:
    err = error("searcher: {name: single, metric: m, max_length: {records: 64}}\n")
    assert err.path == "searcher.max_length.records" and "global_batch_size" in err.message
    err = error(
        "hyperparameters: {global_batch_size: {type: log, minval: 1, maxval: 2}}\n"
        "searcher: {name: single, metric: m, max_length: {records: 64}}\n"
    )
    assert err.path == "searcher.max_length.records"


def test_scheduling_unit_alias() -> None:
    s = "searcher: {name: single, metric: m, max_steps: 2}\n"
    assert parse(s + "scheduling_unit: 7\n").batches_per_step == 7
    assert parse(s + "scheduling_unit: 7\n").max_length_batches == 14
    assert error(s + "scheduling_unit: 7\nbatches_per_step: 8\n").path == "scheduling_unit"


SEARCHER = "searcher: {name: single, metric: m, max_length: 1}\n"


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ("resources: {slots_per_trial: -1}\n", "resources.slots_per_trial"),
        ("resources: {slot_per_trial: 2}\n", "resources.slot_per_trial"),
        ("resources: {priority: 100}\n", "resources.priority"),
        ("max_restarts: true\n", "max_restarts"),
        ("checkpoint_storage: {type: s3}\n", "checkpoint_storage.bucket"),
        ("checkpoint_storage: {type: shared_fs, host_path: /tmp, bucket: x}\n", "checkpoint_storage.bucket"),
        ("checkpoint_storage: {type: ftp}\n", "checkpoint_storage.type"),
        ("checkpoint_storage: {save_trial_best: -1}\n", "checkpoint_storage.save_trial_best"),
        ("entrypoint: 'model def:Trial'\n", None),
        ("entrypoint: 'model-def:Trial'\n", "entrypoint"),
        ("entrypoint: 'model_def:'\n", "entrypoint"),
        ("entrypoint: {script: 3}\n", "entrypoint.script"),
        ("environment: 5\n", "environment"),
        ("environment: {environment_variables: [NOEQUALS]}\n", "environment.environment_variables[0]"),
        ("reproducibility: {experiment_seed: x}\n", "reproducibility.experiment_seed"),
        ("reproducibility: {replay_mismatch: ignore}\n", "reproducibility.replay_mismatch"),
        ("reproducibility: {replay_mismatch: warn}\n", None),
        ("bind_mounts: [{host_path: /data}]\n", "bind_mounts[0].container_path"),
        ("data: [1, 2]\n", "data"),
        ("checkpoint_policy: some\n", "checkpoint_policy"),
        ("min_validation_period: {batches: -1}\n", "min_validation_period.batches"),
        ("description: 5\n", "description"),
        ("labels: [1]\n", "labels[0]"),
        ("records_per_epoch: many\n", "records_per_epoch"),
    ],
)
def test_section_errors(extra: str, path: str | None) -> None:
    if path is None:
        parse(SEARCHER + extra)  # a command with spaces is a valid entrypoint
        return
    err = error(SEARCHER + extra)
    assert err.path == path
    assert err.line == 2


def test_entrypoint_forms() -> None:
    spec = parse(SEARCHER + "entrypoint: ':MNistTrial'\n").entrypoint_spec
    assert spec is not None and (spec.kind, spec.module, spec.object_ref) == ("trial", "", "MNistTrial")
    spec = parse(SEARCHER + "entrypoint: determined_lib.trial:trial_classes.NestedTrial\n").entrypoint_spec
    assert (
        spec is not None
        and spec.module == "determined_lib.trial"
        and spec.object_ref == "trial_classes.NestedTrial"
    )
    spec = parse(SEARCHER + "entrypoint: {script: train.py, args: [--epochs, 5]}\n").entrypoint_spec
    assert spec is not None and (spec.kind, spec.script, spec.args) == (
        "script",
        "train.py",
        ("--epochs", "5"),
    )
    spec = parse(SEARCHER + "entrypoint: train.py\n").entrypoint_spec
    assert spec is not None and (spec.kind, spec.script) == ("script", "train.py")
    spec = parse(SEARCHER + "entrypoint: python3 train.py --lr 0.1\n").entrypoint_spec
    assert spec is not None and spec.command == ("python3", "train.py", "--lr", "0.1")


def test_environment_name_from_string_or_mapping() -> None:
    assert parse(SEARCHER + "environment: torch-2\n").environment_name == "torch-2"
    assert parse(SEARCHER + "environment: {name: tf, image: x}\n").environment_name == "tf"
    assert (
        parse(SEARCHER + "environment: {python: /usr/bin/python3}\n").environment_name == "/usr/bin/python3"
    )
    assert parse(SEARCHER + "environment: {image: {cpu: a, gpu: b}}\n").environment_name is None


def test_defaults_filled() -> None:
    c = parse(SEARCHER)
    assert c.raw["resources"] == {"slots_per_trial": 1, "weight": 1, "native_parallel": False}
    assert c.checkpoint_storage == {"save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}
    assert c.raw["max_restarts"] == 5 and c.raw["batches_per_step"] == 100
    assert c.hyperparameters == {} and c.min_validation_period_batches == 0


def test_masked_hides_secrets_only() -> None:
    c = parse(DETERMINED.replace("data:\n", "data:\n  db_password: hunter2\n  max_tokens: 512\n"))
    masked = c.masked()
    storage = masked["checkpoint_storage"]
    assert storage["secret_key"] == "********" and storage["access_key"] == "********"
    assert storage["bucket"] == "my-bucket"
    assert masked["data"]["db_password"] == "********" and masked["data"]["max_tokens"] == 512
    assert masked["environment"]["environment_variables"] == ["AWS_SECRET_ACCESS_KEY=********"]
    text = c.masked_yaml()
    assert "topsecret" not in text and "hunter2" not in text and "abc123" not in text and "my-bucket" in text
    assert c.raw["checkpoint_storage"]["secret_key"] == "topsecret"


def test_grid_searcher_needs_counts() -> None:
    err = error(
        "hyperparameters:\n  lr: {type: double, minval: 0.1, maxval: 0.2}\n"
        "searcher: {name: grid, metric: m, max_length: 5}\n"
    )
    assert err.path == "hyperparameters.lr" and "count" in err.message and err.line == 2


def test_yaml_dates_become_strings() -> None:
    c = parse(SEARCHER + "data: {since: 2020-01-02}\n")
    assert c.data["since"] == "2020-01-02"


def test_missing_config_file_is_reported_as_such(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        parse_experiment_config(str(tmp_path / "missing.yaml"))
