"""The minimal experiment behind `--test` / `test=True`: the fastest way to surface a model's errors.

One trial with the config's hyperparameters, a few batches of training, one validation and a
checkpoint, and no restarts; everything else about the config (data, entrypoint, storage,
resources) stays as the user wrote it.
"""

from __future__ import annotations

import copy
from typing import Any

from pedl.config.experiment import ExperimentConfig, parse_experiment_config

TEST_BATCHES = 2


def test_mode_config(config: ExperimentConfig) -> ExperimentConfig:
    raw: dict[str, Any] = copy.deepcopy(config.raw)
    raw["searcher"] = {
        "name": "single",
        "metric": config.searcher_metric,
        "smaller_is_better": config.smaller_is_better,
        "max_length": {"batches": TEST_BATCHES},
    }
    raw["batches_per_step"] = TEST_BATCHES
    raw.pop("scheduling_unit", None)
    for key in ("min_validation_period", "min_checkpoint_period"):
        raw.pop(key, None)
    raw["max_restarts"] = 0
    return parse_experiment_config(raw)
