"""Determined's `context.set_stop_requested(True)` (documented: "we finish the step, checkpoint,
then exit"): the trial ends early with a checkpoint, COMPLETED, while the search goes on. Run here
in local mode, which sequences and searches as a cluster does (the cluster: test_early_exit.py)."""

from __future__ import annotations

import pytest

from pedl.config import parse_experiment_config
from pedl.experimental import run_local
from pedl.harness.compat import ensure_determined_importable
from pedl.model_def import load_model_definition
from support.determined_models import stopping_config, write_stopping_trial

ensure_determined_importable()

from determined import pytorch  # noqa: E402


def test_the_stopping_trial_ends_after_its_step_with_a_checkpoint_and_the_others_run_their_length(
    tmp_path,
) -> None:
    context = write_stopping_trial(tmp_path / "stop")
    # Grid over stop_at [0, 7] and two learning rates: two trials stop at batch 7, two never do.
    config = parse_experiment_config(
        stopping_config("name: grid", 20).replace(
            "lr: {type: double, minval: 0.01, maxval: 0.05}", "lr: {type: categorical, vals: [0.01, 0.02]}"
        )
    )
    events: list = []
    result = run_local(config, load_model_definition(context), on_event=events.append)
    assert result.state == "COMPLETED"
    assert len(result.trials) == 4
    for trial in result.trials:
        assert trial.state == "COMPLETED"
        checkpointed = [e[2] for e in events if e[0] == "checkpoint" and e[1] is trial]
        if trial.hparams["stop_at"]:
            # Batch 7 falls in the step of batches 6-10: that step finishes, then a checkpoint.
            assert [b for b, _ in trial.steps] == [5, 10]
            assert checkpointed == [10] and trial.early_exit == "USER_REQUESTED_STOP"
        else:
            assert [b for b, _ in trial.steps] == [5, 10, 15, 20]
            assert checkpointed == [20] and trial.early_exit is None


def test_set_stop_requested_takes_a_bool_and_can_be_taken_back() -> None:
    context = pytorch.PyTorchTrialContext({}, {})
    assert context.get_stop_requested() is False
    context.set_stop_requested(True)
    assert context.get_stop_requested() is True
    context.set_stop_requested(False)
    assert context.get_stop_requested() is False
    with pytest.raises(TypeError, match="set_stop_requested\\(\\) takes a bool, got int"):
        context.set_stop_requested(1)  # type: ignore[arg-type]
