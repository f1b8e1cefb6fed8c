"""What the scheduler sends a trial as its config (StartTrial.config_json) is the config it parsed,
normalised and stored (the experiment's row, with the defaults filled in), in the versioned document
that also carries the lengths it derived."""

from __future__ import annotations

import json

from test_agent_messages import Scenario, run

from pedl.config import carried, parse_experiment_config

# No max_restarts, scheduling_unit for batches_per_step, a bare hyperparameter, epochs to convert.
USER_CONFIG = """
hyperparameters: {global_batch_size: 8, lr: 0.1}
records_per_epoch: 80
scheduling_unit: 5
searcher: {name: single, metric: error, max_length: {epochs: 2}}
"""


def test_the_trial_is_sent_the_stored_normalised_config(tmp_path) -> None:
    async def body() -> None:
        s = Scenario(tmp_path / "pedl.db", slots=1)
        exp_id = s.manager.create_experiment(USER_CONFIG, b"model", "model")
        s.manager.tick(0)
        (start,) = [m.start_trial for m in s.sent() if m.WhichOneof("message") == "start_trial"]
        (row,) = s.rows("SELECT config_json FROM experiments WHERE id = :id", id=exp_id)
        sent = json.loads(start.config_json)
        assert sent["version"] == carried.VERSION and sent["config"] == json.loads(row["config_json"])
        assert sent["config"]["max_restarts"] == 5 and sent["config"]["batches_per_step"] == 5
        assert sent["config"]["hyperparameters"]["lr"] == {"type": "const", "val": 0.1}
        assert sent["max_length"] == 20
        loaded = carried.from_json(start.config_json)
        assert loaded == parse_experiment_config(USER_CONFIG)
        assert loaded.max_length_batches == 20  # 2 epochs of 80 records in batches of 8
        s.manager.db.close()

    run(body)
