"""pedl's JSON Schema (pedl.config.schema): a valid draft 2020-12 schema, and a config that breaks it is
refused in one line naming the file, the line and the field, with a suggestion for a misspelt name."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from pedl.config import ConfigError, parse_experiment_config
from pedl.config.schema import EXPERIMENT_SCHEMA

BASE = "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n"


def test_the_schema_is_a_valid_json_schema_and_plain_json() -> None:
    Draft202012Validator.check_schema(EXPERIMENT_SCHEMA)
    assert json.loads(json.dumps(EXPERIMENT_SCHEMA)) == EXPERIMENT_SCHEMA


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "resources: {slots_per_trail: 2}",
            "line 2: resources.slots_per_trail: unknown field (did you mean 'slots_per_trial'?)",
        ),
        ("resources: {slots_per_trial: -1}", "line 2: resources.slots_per_trial: must be at least 0, got -1"),
        ("resources: {weight: 0}", "line 2: resources.weight: must be greater than 0, got 0"),
        ("resources: {priority: 100}", "line 2: resources.priority: must be at most 99, got 100"),
        ("max_restarts: ten", "line 2: max_restarts: expected an integer, got 'ten'"),
        (
            "checkpoint_policy: bset",
            "line 2: checkpoint_policy: expected one of best, all, none; got 'bset' (did you mean 'best'?)",
        ),
        ("checkpoint_storage: {type: s3}", "line 2: checkpoint_storage.bucket: is required"),
        (
            "checkpoint_storage: {type: s3, bucket: b, host_path: /x}",
            "line 2: checkpoint_storage.host_path: unknown field for s3 checkpoint storage",
        ),
        (
            "environment: {environment_variables: [FOO]}",
            "line 2: environment.environment_variables[0]: expected NAME=value, got 'FOO'",
        ),
        (
            "resources: {shm_size: 4X}",
            "line 2: resources.shm_size: expected a memory size like 4G, 512Mi or 1.5 gb, got '4X'",
        ),
        (
            "min_validation_period: {batches: 1, epochs: 2}",
            "line 2: min_validation_period: expected exactly one of batches, records or epochs; got "
            "batches, epochs",
        ),
        ("hyperparameters: 5", "line 2: hyperparameters: expected a mapping of hyperparameter names, got 5"),
        (
            "hyperparameters: {h: {type: flaot, minval: 1, maxval: 2}}",
            "line 2: hyperparameters.h.type: unknown hyperparameter type 'flaot'",
        ),
        ("entrypoint: []", "line 2: entrypoint: must not be an empty list"),
        (
            "reproducibility: {experiment_seed: -1}",
            "line 2: reproducibility.experiment_seed: must be at least 0, got -1",
        ),
        (
            "optimizations: {mixed_precision: O5}",
            "line 2: optimizations.mixed_precision: expected one of O0, O1, O2, O3; got 'O5'",
        ),
        ("nme: x", "line 2: nme: unknown field (did you mean 'name'?)"),
        ("labels: 5", "line 2: labels: expected a list or a mapping, got 5"),
        (
            "resources: {agent_label: ' a'}",
            "line 2: resources.agent_label: a label is a name without '@' or surrounding spaces",
        ),
    ],
)
def test_a_bad_field_is_one_line_naming_file_line_and_field(extra: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(BASE + extra + "\n", filename="c.yaml")
    assert str(info.value).startswith(f"c.yaml, {expected}"), str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("searcher", "expected"),
    [
        ("{name: randm, metric: x}", "searcher.name: expected one of single, random, grid"),
        (
            "{name: random, metric: x, max_length: 5}",
            "searcher.max_trials: is required for the random searcher",
        ),
        ("{metric: x}", "searcher.name: is required (one of single, random"),
        ("{name: single, metric: x, max_length: {batch: 5}}", "searcher.max_length: expected exactly one of"),
        (
            "{name: single, metric: x, max_length: ten}",
            "searcher.max_length: expected {batches: N}, {records: N}",
        ),
        (
            "{name: grid, metric: x, max_trials: 3}",
            "searcher.max_trials: unknown field for the grid searcher",
        ),
    ],
)
def test_searcher_errors_name_the_searcher(searcher: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(f"searcher: {searcher}\n", filename="c.yaml")
    assert str(info.value).startswith(f"c.yaml, line 1: {expected}"), str(info.value)
