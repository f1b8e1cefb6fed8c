"""A config stored by an older, looser pedl still loads when the scheduler recovers its experiment."""

from __future__ import annotations

import pytest

from pedl.config import ConfigError, parse_experiment_config
from pedl.config.stored import parse_stored_config

OLD = {
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 10}},
    "bind_mounts": [{"host_path": "/tmp", "container_path": "/data"}],
    "checkpoint_storage": {"type": "gcs", "bucket": "b"},
    "optimizations": {"bogus_key": 1},
    "resources": {"slots_per_trial": 1},
    "environment": {"name": "py311", "ports": {"web": 80}},
    "data": {"keep": True},
}


def test_fields_an_older_pedl_ignored_are_dropped_and_the_rest_kept() -> None:
    with pytest.raises(ConfigError):
        parse_experiment_config(OLD)
    config = parse_stored_config(OLD)
    assert "bind_mounts" not in config.raw and "optimizations" not in config.raw
    assert config.resources.slots_per_trial == 1
    assert config.checkpoint_storage.get("type") is None  # the cluster's own store
    assert config.environment_name == "py311" and config.data == {"keep": True}


def test_a_current_config_loads_unchanged() -> None:
    raw = parse_experiment_config({"searcher": {"name": "single", "metric": "m", "max_length": 5}}).raw
    assert parse_stored_config(raw).raw == raw
