"""Configs in the shapes of Determined's shipped examples: accepted, or refused in one line naming a
field pedl does not offer. With PEDL_DETERMINED_EXAMPLES set to a checkout's examples/ directory
(or a directory of several releases' examples), every config there is held to the same promise."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from pedl.config import ConfigError, parse_experiment_config
from pedl.config.yaml12 import Yaml12Loader

CASES = yaml.safe_load((Path(__file__).parent / "example_configs.yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_example_shape(case: dict[str, Any]) -> None:
    if case["expect"] == "accepted":
        parse_experiment_config(case["config"], filename="const.yaml")
        return
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(case["config"], filename="const.yaml")
    assert info.value.path == case["field"]
    assert "\n" not in str(info.value)


def _without_length(config: dict[str, Any]) -> bool:
    """Searchers without a length, or stopping on time: issue #25's, not held to this test."""
    searcher = config.get("searcher") or {}
    lengths = ("max_length", "max_steps", "target_trial_steps", "length_per_round", "steps_per_round")
    return "time_metric" in searcher or "max_time" in searcher or not any(k in searcher for k in lengths)


ROOT = os.environ.get("PEDL_DETERMINED_EXAMPLES", "")


@pytest.mark.skipif(not ROOT or not Path(ROOT).is_dir(), reason="no Determined examples snapshot")
def test_every_shipped_example_is_accepted_or_refused_naming_a_field() -> None:
    checked = 0
    for path in sorted(Path(ROOT).rglob("*.yaml")):
        text = path.read_text(errors="replace")
        try:
            data = yaml.load(text, Loader=Yaml12Loader)
        except yaml.YAMLError:
            continue
        if not isinstance(data, dict) or "searcher" not in data or _without_length(data):
            continue
        checked += 1
        try:
            parse_experiment_config(text, filename=str(path))
        except ConfigError as e:
            assert e.path and e.line and "\n" not in str(e), f"{path}: {e}"
    assert checked > 0
