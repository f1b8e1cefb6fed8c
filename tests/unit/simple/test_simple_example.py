"""The digits_keras_script example in local mode (the cluster's searcher and workload code)."""

from __future__ import annotations

from pathlib import Path

import yaml

from pedl.config import parse_experiment_config
from pedl.experimental import run_local
from pedl.harness.build import load_for_config

EXAMPLE = Path(__file__).parents[3] / "examples" / "digits_keras_script"


def test_local_mode_runs_the_example_and_restores_its_checkpoints() -> None:
    raw = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    raw["searcher"]["max_steps"] = 4
    raw["batches_per_step"] = 20
    config = parse_experiment_config(raw)
    events: list = []
    result = run_local(
        config, load_for_config(EXAMPLE, config.raw), verify_restore=True, on_event=events.append
    )
    assert result.state == "COMPLETED"
    (trial,) = result.trials
    assert [b for b, _ in trial.steps] == [20, 40, 60, 80]
    assert [b for b, _ in trial.validations] == [40, 80]
    assert trial.best_validation is not None and trial.best_validation > 0.7
    assert "restored" in [e[0] for e in events]
