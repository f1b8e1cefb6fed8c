"""`det e create --config KEY=VALUE`: Determined's overrides applied to the config file's YAML."""

from __future__ import annotations

import pytest
import yaml

from pedl.cli.config_overrides import OverrideError, apply_overrides

BASE = """
name: base
searcher:
  name: random
  max_trials: 8
hyperparameters:
  lr: 0.1
"""


def _applied(*overrides: str) -> dict:
    return yaml.safe_load(apply_overrides(BASE, list(overrides)))


def test_a_dotted_path_sets_a_nested_field_with_the_value_read_as_yaml() -> None:
    config = _applied("searcher.max_trials=4", "name=xyz", "resources.slots_per_trial=2")
    assert config["searcher"] == {"name": "random", "max_trials": 4}
    assert config["name"] == "xyz" and config["resources"] == {"slots_per_trial": 2}


def test_values_keep_their_yaml_types_and_quoting_makes_strings() -> None:
    config = _applied("hyperparameters.lr=[0.1, 0.01]", "description='4'", "max_restarts=0", "debug=true")
    assert config["hyperparameters"]["lr"] == [0.1, 0.01]
    assert config["description"] == "4" and config["max_restarts"] == 0 and config["debug"] is True


def test_later_overrides_win() -> None:
    assert _applied("searcher.max_trials=4", "searcher.max_trials=5")["searcher"]["max_trials"] == 5


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("searcher", "expected KEY=VALUE"),
        ("=4", "expected KEY=VALUE"),
        ("searcher..name=x", "expected KEY=VALUE"),
        ("name.first=x", "name is a str, not a section"),
        ("searcher.name=[", "not valid YAML"),
    ],
)
def test_bad_overrides_are_refused_naming_the_override(override: str, message: str) -> None:
    with pytest.raises(OverrideError) as e:
        apply_overrides(BASE, [override])
    assert message in str(e.value) and repr(override) in str(e.value)


def test_a_config_that_does_not_parse_is_left_for_its_own_error_with_its_line() -> None:
    broken = "searcher: [\n"
    assert apply_overrides(broken, ["name=x"]) == broken
