"""`checkpoint_policy` defaults to `best`, as Determined's experiment-config reference says: a config
that names none checkpoints after each validation better than all before, and never after others."""

from __future__ import annotations

from pedl.config import parse_experiment_config
from pedl.sequencer import TrialSequencer

CONFIG = (
    "searcher: {name: single, metric: validation_loss, max_length: {batches: 300}}\n"
    "min_validation_period: {batches: 100}\n"
    "hyperparameters: {global_batch_size: 8}\n"
)


def sequencer(extra: str = "") -> TrialSequencer:
    config = parse_experiment_config(CONFIG + extra)
    seq = TrialSequencer.for_config(config, {"global_batch_size": 8})
    seq.add_target(300)
    return seq


def test_a_config_naming_no_policy_checkpoints_after_each_new_best_as_best_does() -> None:
    default, best, none = (
        sequencer(),
        sequencer("checkpoint_policy: best\n"),
        sequencer("checkpoint_policy: none\n"),
    )
    assert parse_experiment_config(CONFIG).checkpoint_policy == "best"
    assert default.checkpoint_after_best_validation and best.checkpoint_after_best_validation
    assert not default.checkpoint_after_validation
    assert not none.checkpoint_after_best_validation and not none.checkpoint_after_validation
