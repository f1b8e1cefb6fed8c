"""What the API shows of an experiment never includes the secrets its config holds."""

from __future__ import annotations

import json

from pedl._metrics import from_struct
from pedl.config import MASK
from pedl_scheduler import convert


def test_the_api_config_is_masked_and_carries_the_owner() -> None:
    raw = {"checkpoint_storage": {"type": "s3", "bucket": "b", "secret_key": "TOPSECRET"}, "searcher": {}}
    row = {
        "id": 1, "state": "ACTIVE", "config_yaml": "masked", "config_json": json.dumps(raw), "created_at": "",
        "ended_at": "", "model_definition_name": "m", "error": "", "owner": "alice",
    }  # fmt: skip
    message = convert.experiment(row, 0)
    assert "TOPSECRET" not in str(message)
    assert from_struct(message.config)["checkpoint_storage"]["secret_key"] == MASK
    assert message.owner == "alice"


def test_a_secret_named_hyperparameter_is_masked_and_the_others_stay_plottable() -> None:
    hparams = {"api_key": "sk-live-42", "lr": 0.01, "opt": {"name": "sgd", "auth_token": 7}}
    row = {
        "id": 3, "experiment_id": 1, "state": "ACTIVE", "total_batches": 0, "run_id": 1, "restarts": 0,
        "latest_checkpoint_uuid": "", "start_time": "", "end_time": "", "seed": 1, "best_validation": None,
        "hparams_json": json.dumps(hparams),
        "error": "download of https://u:pa55word@h/x failed",
    }  # fmt: skip
    message = convert.trial(row)
    assert from_struct(message.hparams) == {
        "api_key": MASK,
        "lr": 0.01,
        "opt": {"name": "sgd", "auth_token": MASK},
    }
    assert message.error == f"download of https://u:{MASK}@h/x failed"


def test_a_description_with_a_url_password_is_masked() -> None:
    raw = {"description": "data from https://u:pa55word@h/x?token=abcd", "searcher": {}}
    row = {
        "id": 1, "state": "ACTIVE", "config_yaml": "", "config_json": json.dumps(raw), "created_at": "",
        "ended_at": "", "model_definition_name": "m", "error": "", "owner": "",
    }  # fmt: skip
    assert convert.experiment(row, 0).description == f"data from https://u:{MASK}@h/x?token={MASK}"
