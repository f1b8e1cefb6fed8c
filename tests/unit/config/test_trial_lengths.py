"""Lengths in epochs and records that only the trial can count in batches (Determined since 0.2x: an
epoch of a PyTorch trial is its training data loader's length; records divide by its batch size)."""

from __future__ import annotations

from pathlib import Path

import pytest

import pedl.experimental
from pedl.config import ConfigError, parse_experiment_config
from pedl.harness.epoch import EpochLengthUnavailable, epoch_length, refusal_signature
from pedl.model_def import load_model_definition
from pedl.searcher.asha import ASHASearch
from pedl.sequencer import Kind, TrialSequencer
from support.models import write_tiny_model

EPOCHS = """\
hyperparameters: {global_batch_size: 32, learning_rate: 0.1}
searcher: {name: single, metric: error, max_length: {epochs: 2}}
min_validation_period: {epochs: 1}
batches_per_step: 10
entrypoint: model_def:Trial
"""


def parse(text: str):
    return parse_experiment_config(text, filename="const.yaml")


def play(seq: TrialSequencer) -> list[tuple[str, int]]:
    """Plays the harness (and a searcher that closes the trial at its target) until it waits or ends."""
    out = []
    while (nxt := seq.next_workload()) is not None:
        out.append((nxt.kind.value, nxt.total_batches))
        if nxt.kind is Kind.RUN_STEP:
            seq.on_step_completed(nxt.step_id, nxt.total_batches)
        elif nxt.kind is Kind.COMPUTE_VALIDATION_METRICS:
            if seq.on_validation_completed(nxt.total_batches):
                seq.close()
        elif nxt.kind is Kind.CHECKPOINT_MODEL:
            seq.on_checkpoint_completed(nxt.total_batches)
        else:
            seq.on_terminate_sent()
    return out


def test_epochs_without_records_per_epoch_are_accepted_and_left_to_the_trial() -> None:
    c = parse(EPOCHS)
    assert (c.max_length, c.length_unit) == (2, "epochs") and c.max_length_batches is None
    assert c.needs_trial_epoch_length
    assert c.describe_lengths() == [
        "max_length 2 epochs",
        "min_validation_period 1 epoch",
        "an epoch is each trial's training data loader's length, measured when it starts",
    ]
    assert parse_experiment_config(c.raw).length_unit == "epochs"  # a stored config re-reads alike


def test_records_per_epoch_still_wins_when_given() -> None:
    c = parse("records_per_epoch: 1000\n" + EPOCHS)
    assert c.max_length_batches == 63 and c.min_validation_period_batches == 32
    assert not c.needs_trial_epoch_length


def test_a_searched_batch_size_converts_per_trial() -> None:
    c = parse(
        "hyperparameters: {global_batch_size: {type: categorical, vals: [16, 32]}}\n"
        "records_per_epoch: 1000\n"
        "searcher: {name: random, metric: loss, max_trials: 2, max_length: {epochs: 2}}\n"
        "min_checkpoint_period: {records: 64}\n"
    )
    assert c.length_unit == "epochs" and not c.needs_trial_epoch_length
    small = TrialSequencer.for_config(c, {"global_batch_size": 16})
    large = TrialSequencer.for_config(c, {"global_batch_size": 32})
    for seq in (small, large):
        seq.add_target(2)
    assert small._target_batches(2) == 125 and large._target_batches(2) == 63  # 2000 records, rounded up
    assert small._period_batches(64, "records") == 4 and large._period_batches(64, "records") == 2


def test_the_sequencer_waits_for_the_epoch_then_validates_at_each_epoch_boundary() -> None:
    seq = TrialSequencer.for_config(parse(EPOCHS), {"global_batch_size": 32})
    seq.add_target(2)
    assert seq.awaits_epoch_length and seq.next_workload() is None
    seq.learn_epoch_length(32)
    assert play(seq) == [
        ("RUN_STEP", 10),
        ("RUN_STEP", 20),
        ("RUN_STEP", 30),
        ("RUN_STEP", 32),
        ("COMPUTE_VALIDATION_METRICS", 32),
        ("RUN_STEP", 42),
        ("RUN_STEP", 52),
        ("RUN_STEP", 62),
        ("RUN_STEP", 64),
        ("COMPUTE_VALIDATION_METRICS", 64),
        ("CHECKPOINT_MODEL", 64),
        ("TERMINATE", 64),
    ]
    assert seq.answered_length == 2  # the searcher hears its own unit
    assert seq.completed


def test_the_learned_epoch_is_stored_with_the_trial() -> None:
    seq = TrialSequencer.for_config(parse(EPOCHS))
    seq.add_target(2)
    seq.learn_epoch_length(7)
    again = TrialSequencer.from_dict(seq.to_dict())
    assert again.epoch_batches == 7 and not again.awaits_epoch_length
    assert again.next_workload().total_batches == 7  # up to the first epoch's validation
    with pytest.raises(ValueError, match="empty"):
        seq.learn_epoch_length(0)


def test_a_trial_stopped_before_it_measured_its_epoch_terminates() -> None:
    seq = TrialSequencer.for_config(parse(EPOCHS))
    seq.add_target(2)
    seq.request_stop()
    assert seq.next_workload().kind is Kind.TERMINATE


def test_asha_counts_rungs_in_epochs() -> None:
    c = parse(
        "hyperparameters: {global_batch_size: 32}\n"
        "searcher: {name: adaptive_asha, metric: loss, max_trials: 64, max_rungs: 3,\n"
        "           max_length: {epochs: 16}}\n"
    )
    search = ASHASearch(c, 0)
    assert sorted({n for bracket in search.brackets for n in bracket.rung_lengths}) == [1, 4, 16]


def test_lengths_that_cannot_be_counted_are_refused_in_one_line() -> None:
    cases = [
        ("searcher: {name: single, metric: m, max_length: {records: 64}}\n", "searcher.max_length.records"),
        (
            "searcher: {name: adaptive, metric: m, max_length: {epochs: 2}, budget: {batches: 90}}\n",
            "searcher.budget",
        ),
        (
            "searcher: {name: async_halving, metric: m, max_trials: 2, num_rungs: 3,\n"
            "           max_length: {epochs: 2}}\n",
            "searcher.num_rungs",
        ),
    ]
    for text, field in cases:
        with pytest.raises(ConfigError) as info:
            parse(text)
        assert info.value.path == field and "\n" not in str(info.value)


def test_a_core_api_script_gets_the_length_as_written_and_counts_its_unit_itself() -> None:
    script = "entrypoint: python3 train.py\nsearcher: {name: single, metric: m, max_length: {epochs: 3}}\n"
    for config in (script, script + "records_per_epoch: 1000\nhyperparameters: {global_batch_size: 10}\n"):
        c = parse(config)
        assert (c.max_length, c.script_length_unit) == (3, "epochs") and not c.needs_trial_epoch_length
        assert c.describe_lengths() == ["max_length 3 epochs, counted by the script"]


def test_a_trial_without_a_data_loader_length_is_refused_naming_records_per_epoch() -> None:
    class KerasTrialController:  # what a Keras trial's controller offers: no epoch_batches
        pass

    assert parse(EPOCHS).needs_trial_epoch_length
    with pytest.raises(EpochLengthUnavailable) as info:
        epoch_length(KerasTrialController())
    message = str(info.value)
    assert message.startswith("records_per_epoch:") and "KerasTrial " in message and "\n" not in message
    signature = refusal_signature(info.value)
    assert signature is not None and signature.location == "experiment config: records_per_epoch"


def test_local_mode_trains_two_loader_lengths_validating_at_each_epoch(tmp_path: Path) -> None:
    directory = write_tiny_model(tmp_path / "tiny")  # 256 records in batches of 8: 32 batches an epoch
    trial_class = load_model_definition(directory).trial_class
    result = pedl.experimental.create(trial_class, directory, config=EPOCHS, local=True)
    assert result.state == "COMPLETED"
    (trial,) = result.trials
    assert trial.steps[-1][0] == 64
    assert [b for b, _ in trial.validations] == [32, 64]
