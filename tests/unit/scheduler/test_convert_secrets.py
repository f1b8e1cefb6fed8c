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
