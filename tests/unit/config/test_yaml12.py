"""Configs are read as Determined's CLI reads them (YAML 1.2), not as PyYAML's YAML 1.1."""

from __future__ import annotations

import pytest

from pedl.config import ConfigError, parse_experiment_config

S = "searcher:\n  name: single\n  metric: loss\n  max_length:\n    batches: 10\n"


def test_scientific_notation_is_a_number() -> None:
    config = parse_experiment_config(S + "hyperparameters:\n  lr: 1e-5\n  wd: 3E2\n")
    assert config.hyperparameters["lr"] == {"type": "const", "val": 1e-5}
    assert config.hyperparameters["wd"]["val"] == 300.0


def test_yes_no_on_off_are_strings() -> None:
    config = parse_experiment_config(S + "description: no\nname: on\ndata:\n  a: yes\n  b: off\n  c: y\n")
    assert config.description == "no" and config.name == "on"
    assert config.data == {"a": "yes", "b": "off", "c": "y"}


def test_booleans_nulls_and_integers_of_yaml_12() -> None:
    text = (
        S + "data:\n  t: True\n  f: FALSE\n  n: ~\n  e:\n  dec: 010\n  oct: 0o17\n  hex: 0x1f\n  inf: .inf\n"
    )
    data = parse_experiment_config(text).data
    assert data == {
        "t": True,
        "f": False,
        "n": None,
        "e": None,
        "dec": 10,
        "oct": 15,
        "hex": 31,
        "inf": float("inf"),
    }


def test_duplicate_key_names_both_lines() -> None:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(S + "name: a\nsearcher:\n  name: random\n", filename="exp.yaml")
    e = info.value
    assert (e.filename, e.line, e.path) == ("exp.yaml", 7, "searcher")
    assert "first on line 1" in e.message and "again on line 7" in e.message


def test_nested_duplicate_key() -> None:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(S + "data:\n  x: 1\n  x: 2\n")
    assert info.value.path == "data.x" and info.value.line == 8


def test_the_same_key_in_different_mappings_is_fine() -> None:
    parse_experiment_config(S + "data:\n  name: a\nhyperparameters:\n  name: b\n")


def test_the_yaml_pedl_writes_reads_back_the_same_under_yaml_11_and_12() -> None:
    import yaml

    config = parse_experiment_config(S + "data:\n  a: '1e-5'\n  b: no\n  c: '010'\n  d: 1e-5\n  e: 'yes'\n")
    text = config.masked_yaml()
    assert parse_experiment_config(text).raw == config.raw
    assert yaml.safe_load(text)["data"] == config.data  # PyYAML (YAML 1.1) agrees
