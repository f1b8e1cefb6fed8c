"""The scheduler sends each experiment's typed config (Experiment.config_document) so the web UI never
re-parses YAML: the document decodes with the one decoder agents use, secrets masked."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pedl.config import MASK, carried
from pedl.config.experiment import parse_experiment_config
from pedl_scheduler import convert

CONFIG = {
    "entrypoint": "model_def:Trial",
    "hyperparameters": {"global_batch_size": 64, "api_key": "sk-live-42"},
    "searcher": {"name": "single", "metric": "loss", "max_length": {"records": 6400}},
    "checkpoint_storage": {"type": "s3", "bucket": "b", "secret_key": "TOPSECRET"},
}


def row(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": 1, "state": "ACTIVE", "config_yaml": "", "config_json": json.dumps(config), "created_at": "",
        "ended_at": "", "model_definition_name": "m", "error": "", "owner": "",
    }  # fmt: skip


def test_the_document_is_the_typed_config_with_its_lengths_and_no_secrets() -> None:
    stored = parse_experiment_config(CONFIG).raw  # what CreateExperiment stores
    message = convert.experiment(row(stored), 0)
    assert "TOPSECRET" not in message.config_document and "sk-live-42" not in message.config_document
    config = carried.from_json(message.config_document)
    assert (config.max_length, config.length_unit) == (100, "batches")  # 6400 records of 64
    assert config.checkpoint_storage["secret_key"] == MASK
    assert config.searcher_name == "single"


def test_a_list_page_carries_documents_only_when_asked() -> None:
    stored = parse_experiment_config(CONFIG).raw
    assert convert.experiment(row(stored), 0, document=False).config_document == ""


def test_a_stored_config_that_no_longer_parses_gives_no_document_not_an_error() -> None:
    assert convert.experiment(row({"searcher": {}}), 0).config_document == ""


def test_a_running_experiments_document_comes_from_its_live_config_without_a_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live = parse_experiment_config({**CONFIG, "description": "live one"})

    def no_parse(raw: object) -> None:
        raise AssertionError("the stored config was parsed again")

    monkeypatch.setattr(convert, "parse_stored_config", no_parse)
    message = convert.experiment(row(live.raw), 0, live=live)
    assert carried.from_json(message.config_document).description == "live one"
    # Asked again (a polling client), the document is the one made before.
    assert convert.experiment(row(live.raw), 0).config_document == message.config_document
