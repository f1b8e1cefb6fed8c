"""A scheduler's --image-environment rules: a Determined config's `environment.image` picks the agents'
Python environment whose pattern it matches, unchanged; a named environment wins; no match keeps the
warning that the image is not pulled."""

from __future__ import annotations

import json

import pytest

from pedl.config import carried, parse_experiment_config
from pedl.config.image_environments import parse_image_rules, resolve

TF28_CPU = "determinedai/environments:py-3.8-pytorch-1.10-tf-2.8-cpu-096d730"
RULES = parse_image_rules(["*tf-2.1[0-5]*=tf215", "*tf-2.8*=tf28", "*pytorch-1.*=torch1"])


def _config(environment: str) -> str:
    return (
        "name: x\nentrypoint: model_def:T\n"
        "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n" + environment
    )


def test_an_image_picks_the_first_environment_whose_pattern_it_matches() -> None:
    config = resolve(parse_experiment_config(_config(f"environment:\n  image: {TF28_CPU}\n")), RULES)
    assert config.environment_name == "tf28"
    assert not any("is not pulled" in w for w in config.warnings)
    assert any("'tf28'" in w and "*tf-2.8*=tf28" in w for w in config.warnings)


def test_the_cpu_image_of_a_per_device_mapping_is_matched_first() -> None:
    text = _config(
        "environment:\n  image:\n    cuda: determinedai/environments:cuda-11.8-tf-2.12-gpu\n"
        f"    cpu: {TF28_CPU}\n"
    )
    assert resolve(parse_experiment_config(text), RULES).environment_name == "tf28"
    gpu_only = _config("environment:\n  image:\n    cuda: determinedai/environments:cuda-11.8-tf-2.12-gpu\n")
    assert resolve(parse_experiment_config(gpu_only), RULES).environment_name == "tf215"


def test_a_named_environment_wins_over_the_image() -> None:
    text = _config(f"environment:\n  name: default\n  image: {TF28_CPU}\n")
    assert resolve(parse_experiment_config(text), RULES).environment_name == "default"


def test_an_image_matching_nothing_keeps_the_default_and_the_warning() -> None:
    config = parse_experiment_config(_config("environment:\n  image: my/own:latest\n"))
    resolved = resolve(config, RULES)
    assert resolved is config and resolved.environment_name is None
    assert any(w.startswith("environment.image:") and "is not pulled" in w for w in resolved.warnings)


def test_the_config_user_code_reads_is_unchanged() -> None:
    config = resolve(parse_experiment_config(_config(f"environment:\n  image: {TF28_CPU}\n")), RULES)
    assert config.raw["environment"] == {"image": TF28_CPU}
    assert json.loads(carried.to_json(config))["config"] == {**config.raw, "environment": {"image": TF28_CPU}}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("*tf-2.8*", "must be PATTERN=NAME"),
        ("=tf28", "must be PATTERN=NAME"),
        ("*tf-2.8*=", "must be PATTERN=NAME"),
        ("*tf-2.8*=tf 28", "may hold only letters"),
    ],
)
def test_a_bad_rule_is_refused_naming_it(value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as e:
        parse_image_rules([value])
    assert repr(value) in str(e.value)
