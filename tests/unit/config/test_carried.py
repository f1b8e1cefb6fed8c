"""The config the scheduler sends its agents and harnesses (`StartTrial.config_json`) is the config it
parsed: a versioned document that decodes to the same object, for every config pedl accepts, without
being parsed or its lengths derived again; an older scheduler's plain config is still parsed, and one
that does not parse is refused with a line naming where it came from and the field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pedl.config import ConfigError, ExperimentConfig, carried, parse_experiment_config, test_mode

ROOT = Path(__file__).resolve().parents[3]
CONFORMANCE = ROOT / "tests" / "conformance"
BASE: dict[str, Any] = {"searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 10}}}


def _placed(at: str, fragment: Any) -> Any:
    """A schema case's fragment in an otherwise minimal config (as determined_schema_cases.yaml says)."""
    if not at:
        return copy.deepcopy(fragment)
    config = copy.deepcopy(BASE)
    parts = at.split(".")
    if parts == ["searcher"]:
        config.pop("searcher")
    node = config
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = copy.deepcopy(fragment)
    return config


def _sources() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for case in yaml.safe_load((CONFORMANCE / "example_configs.yaml").read_text()):
        out.append((f"example: {case['name']}", case["config"]))
    for case in yaml.safe_load((CONFORMANCE / "determined_schema_cases.yaml").read_text()):
        out.append((f"schema: {case['what']}", _placed(case["at"], case["fragment"])))
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        out.append((f"file: {path.relative_to(ROOT)}", path.read_text()))
    return out


def _accepted() -> list[tuple[str, ExperimentConfig]]:
    out = []
    for name, source in _sources():
        try:
            out.append((name, parse_experiment_config(source)))
        except ConfigError:
            continue  # refused configs are the conformance tests' business
    return out


ACCEPTED = _accepted()


def test_the_corpus_is_large() -> None:
    assert len(ACCEPTED) >= 60


@pytest.mark.parametrize(("name", "config"), ACCEPTED, ids=[name for name, _ in ACCEPTED])
def test_round_trip_gives_the_same_config(name: str, config: ExperimentConfig) -> None:
    text = carried.to_json(config)
    again = carried.from_json(text)
    assert again == config
    assert carried.to_json(again) == text
    # Test mode's config travels the same way.
    minimal = test_mode.test_mode_config(config)
    assert carried.carried(minimal) == minimal


def test_the_json_holds_the_scheduler_normalisation() -> None:
    config = parse_experiment_config(
        """
        hyperparameters: {global_batch_size: 32, lr: 0.1}
        records_per_epoch: 640
        scheduling_unit: 7
        searcher: {name: single, metric: loss, max_length: {epochs: 3}}
        min_validation_period: 2
        entrypoint: model_def:Trial
        """
    )
    sent = json.loads(carried.to_json(config))
    assert sent["version"] == carried.VERSION
    assert sent["config"]["batches_per_step"] == 7
    assert sent["config"]["max_restarts"] == 5
    assert sent["config"]["hyperparameters"]["lr"] == {"type": "const", "val": 0.1}
    # The lengths travel as the scheduler derived them.
    assert (sent["max_length"], sent["length_unit"]) == (60, "batches")  # 3 epochs of 640 records / 32
    assert sent["min_validation_period"] == {"amount": 14, "unit": "batches"}  # 2 steps of 7 batches
    assert sent["entrypoint"]["kind"] == "trial" and sent["entrypoint"]["object_ref"] == "Trial"
    loaded = carried.from_json(json.dumps(sent))
    assert loaded.max_length_batches == 60
    assert loaded.min_validation_period_batches == 14


def test_decoding_neither_parses_nor_derives_again(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_experiment_config({**BASE, "entrypoint": "python3 train.py --epochs 2"})
    text = carried.to_json(config)

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the document was parsed again")

    monkeypatch.setattr(carried, "parse_experiment_config", refuse)
    before = carried.decoded
    again = carried.from_json(text)
    assert again == config and again.entrypoint_spec is not None and again.entrypoint_spec.kind == "command"
    assert carried.decoded == before + 1


def test_a_document_of_another_version_is_refused_in_one_line() -> None:
    sent = json.loads(carried.to_json(parse_experiment_config(BASE)))
    sent["version"] = 2
    with pytest.raises(ConfigError) as info:
        carried.from_json(json.dumps(sent))
    assert str(info.value).startswith(
        "config_json: is version 2 of the config document; this pedl reads version 1"
    )
    assert "\n" not in str(info.value)


def test_secrets_travel_unmasked() -> None:
    config = parse_experiment_config(
        {**BASE, "checkpoint_storage": {"type": "s3", "bucket": "b", "secret_key": "s3cr3t"}}
    )
    assert carried.from_json(carried.to_json(config)).checkpoint_storage["secret_key"] == "s3cr3t"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "config_json: is empty (no experiment config arrived)"),
        ('{"searcher": ', "config_json, line 1: not valid JSON: Expecting value (column 14)"),
        ("[1, 2]", "config_json: must be a JSON object, got list"),
        ('{"searcher": {"name": "single", "metric": "loss"}}', "config_json: searcher.max_length"),
        (
            json.dumps({**BASE, "max_restarts": "five"}),
            "config_json: max_restarts: expected an integer, got 'five'",
        ),
        (json.dumps({**BASE, "resources": {"slots_per_trail": 2}}), "config_json: resources.slots_per_trail"),
    ],
)
def test_a_bad_config_names_its_source_and_field(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        carried.from_json(text)
    assert str(info.value).startswith(expected), str(info.value)
    assert "\n" not in str(info.value)
