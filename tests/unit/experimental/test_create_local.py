"""`pedl.experimental.create` in local and test modes: the same searcher and harness, in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

import pedl.experimental
from pedl.model_def import ModelDefinitionError, load_model_definition
from support.models import tiny_config, write_tiny_model


def tiny_trial(tmp_path: Path, name: str = "tiny", build_model_body: str = "pass") -> tuple[type, Path]:
    directory = write_tiny_model(tmp_path / name, build_model_body=build_model_body)
    return load_model_definition(directory).trial_class, directory


def test_local_mode_runs_the_whole_experiment_here(tmp_path) -> None:
    trial_def, context = tiny_trial(tmp_path)
    result = pedl.experimental.create(trial_def, context, config=tiny_config(max_batches=40), local=True)
    assert result.state == "COMPLETED"
    (trial,) = result.trials
    assert [b for b, _ in trial.steps] == [10, 20, 30, 40]
    assert [b for b, _ in trial.validations] == [20, 40]
    assert trial.checkpoints and (result.checkpoint_dir / f"trial-1/{trial.checkpoints[-1]}").is_dir()
    assert trial.best_validation is not None


def test_test_mode_trains_a_few_batches_validates_and_restores_a_checkpoint(tmp_path) -> None:
    trial_def, context = tiny_trial(tmp_path)
    events = []
    from pedl.config import parse_experiment_config
    from pedl.config.test_mode import test_mode_config
    from pedl.experimental import run_local

    config = test_mode_config(parse_experiment_config(tiny_config(max_batches=10**6)))
    result = run_local(config, load_model_definition(context), verify_restore=True, on_event=events.append)
    assert result.state == "COMPLETED"
    assert [b for b, _ in result.trials[0].steps] == [2]
    assert [e[0] for e in events] == ["step", "validation", "checkpoint", "restored", "trial_completed"]


def test_test_mode_raises_the_users_own_error(tmp_path) -> None:
    trial_def, context = tiny_trial(tmp_path, "broken", build_model_body="raise KeyError('no such layer')")
    with pytest.raises(KeyError, match="no such layer"):
        pedl.experimental.create(trial_def, context, config=tiny_config(), local=True, test=True)


def test_config_may_be_a_dict_or_a_path(tmp_path) -> None:
    import yaml

    trial_def, context = tiny_trial(tmp_path)
    config = yaml.safe_load(tiny_config(max_batches=10))
    assert pedl.experimental.create(trial_def, context, config=config, local=True).state == "COMPLETED"
    path = tmp_path / "const.yaml"
    path.write_text(tiny_config(max_batches=10))
    assert pedl.experimental.create(trial_def, context, config=str(path), local=True).state == "COMPLETED"


def test_a_trial_defined_outside_the_context_dir_is_refused(tmp_path) -> None:
    trial_def, _ = tiny_trial(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(ModelDefinitionError, match="outside context_dir"):
        pedl.experimental.create(trial_def, elsewhere, config=tiny_config(), local=True)


def test_a_searcher_metric_the_trial_does_not_report_is_named(tmp_path) -> None:
    trial_def, context = tiny_trial(tmp_path)
    config = tiny_config().replace("metric: error", "metric: accuracy_top5")
    with pytest.raises(ValueError, match=r"'accuracy_top5' is not among .*\(error, loss, validation_loss\)"):
        pedl.experimental.create(trial_def, context, config=config, local=True)


def test_local_trials_see_the_configs_environment_variables(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("TEST_GREETING_29", raising=False)
    body = "import os; assert os.environ.get('TEST_GREETING_29') == 'hi there', dict(os.environ)"
    trial_def, context = tiny_trial(tmp_path, "envvars", build_model_body=body)
    extra = "environment:\n  environment_variables:\n    - TEST_GREETING_29=hi there\n"
    config = tiny_config(max_batches=10, extra=extra)
    result = pedl.experimental.create(trial_def, context, config=config, local=True)
    assert result.state == "COMPLETED"
    import os

    assert "TEST_GREETING_29" not in os.environ  # restored after the experiment


def test_initial_validation_and_checkpoint_policy_all(tmp_path) -> None:
    trial_def, context = tiny_trial(tmp_path, "initial")
    config = tiny_config(max_batches=40, extra="perform_initial_validation: true\ncheckpoint_policy: all\n")
    result = pedl.experimental.create(trial_def, context, config=config, local=True)
    (trial,) = result.trials
    assert [b for b, _ in trial.validations] == [0, 20, 40]
    assert len(trial.checkpoints) == 2  # after the validations at 20 and 40 (none of the untrained model)


def test_create_prints_warnings_for_fields_without_effect(tmp_path, capsys) -> None:
    trial_def, context = tiny_trial(tmp_path, "warned")
    config = tiny_config(max_batches=10, extra="environment:\n  image: pytorch:2\n")
    assert pedl.experimental.create(trial_def, context, config=config, local=True).state == "COMPLETED"
    assert "warning: environment.image: has no effect in pedl" in capsys.readouterr().err


def test_checkpoint_policy_best_checkpoints_after_each_new_best_validation(tmp_path) -> None:
    from pedl.config import parse_experiment_config
    from pedl.experimental import run_local

    _, context = tiny_trial(tmp_path, "best")
    raw = tiny_config(max_batches=80, validation_period=10, extra="checkpoint_policy: best\n")
    # A large learning rate: the validation loss goes up and down, so not every validation is a new best.
    raw = raw.replace("metric: error", "metric: validation_loss").replace(
        "learning_rate: 0.1", "learning_rate: 8.0"
    )
    config = parse_experiment_config(raw)
    events: list = []
    result = run_local(config, load_model_definition(context), on_event=events.append)
    assert result.state == "COMPLETED"
    (trial,) = result.trials
    losses = [(b, m["validation_loss"]) for b, m in trial.validations]
    improved = [b for i, (b, v) in enumerate(losses) if all(v < w for _, w in losses[:i])]
    checkpointed = [e[2] for e in events if e[0] == "checkpoint"]
    assert checkpointed == sorted(set(improved) | {80})  # and the trial's end, under every policy
    assert set(improved) != {b for b, _ in losses}, losses


def test_a_warm_start_is_refused_in_local_mode_by_name(tmp_path) -> None:
    trial_def, context = tiny_trial(tmp_path, "warm")
    config = tiny_config(max_batches=10).replace("    batches: 10", "    batches: 10\n  source_trial_id: 3")
    with pytest.raises(ValueError, match="searcher.source_trial_id: a warm start .* runs only on a cluster"):
        pedl.experimental.create(trial_def, context, config=config, local=True)


@pytest.mark.parametrize("test", [False, True])
def test_local_and_test_mode_trials_get_the_config_a_cluster_harness_would_load(tmp_path, test) -> None:
    import json

    import yaml

    from pedl.config import carried

    seen_path = tmp_path / "seen.json"
    body = (
        f"import json, pathlib, pedl.util; "
        f"pathlib.Path({str(seen_path)!r}).write_text(json.dumps(pedl.util.get_experiment_config()))"
    )
    trial_def, context = tiny_trial(tmp_path, "seen", build_model_body=body)
    config = yaml.safe_load(tiny_config(max_batches=10))
    config["data"] = {"sizes": (1, 2)}  # a tuple: JSON, as the scheduler sends it, has lists
    result = pedl.experimental.create(trial_def, context, config=config, local=True, test=test)
    assert result.state == "COMPLETED"
    seen = json.loads(seen_path.read_text())
    assert seen["data"] == {"sizes": [1, 2]}
    assert seen["hyperparameters"]["learning_rate"] == {"type": "const", "val": 0.1}
    assert seen["max_restarts"] == (0 if test else 5)
    assert seen["entrypoint"].endswith(":TinyTrial")
    assert carried.from_json(json.dumps(seen)).raw == seen


def test_an_asha_promotion_in_local_mode_continues_the_same_trial(tmp_path) -> None:
    """As on a cluster: a promoted trial goes on from its checkpoint; no further trial is made."""
    trial_def, context = tiny_trial(tmp_path)
    config = tiny_config(max_batches=40, validation_period=10).replace(
        "name: single",
        "name: adaptive_asha\n  max_trials: 4\n  max_rungs: 2\n  divisor: 4\n  mode: aggressive\n"
        "  max_concurrent_trials: 1",
    )
    result = pedl.experimental.create(trial_def, context, config=config, local=True)
    assert result.state == "COMPLETED" and len(result.trials) == 4
    (top,) = [t for t in result.trials if t.steps[-1][0] == 40]
    assert [b for b, _ in top.steps] == [10, 20, 30, 40]  # continued from batch 10, not from 0
    assert sorted(t.steps[-1][0] for t in result.trials) == [10, 10, 10, 40]
