"""Searchers without a length (a Core API script decides when it is done), the sequencing of such a
trial, and the lengths of Determined's legacy searcher operations."""

from __future__ import annotations

from pedl.config import parse_experiment_config
from pedl.searcher import Close, Create, ValidateAfter, make_search_method
from pedl.searcher.operations import operation_lengths
from pedl.sequencer import Kind, TrialSequencer


def config(searcher: str, entrypoint: str = "python3 train.py"):
    return parse_experiment_config(
        f"entrypoint: {entrypoint}\nhyperparameters: {{a: {{type: categorical, vals: [1, 2]}}}}\n"
        f"searcher: {searcher}\n"
    )


def test_single_and_random_without_a_length_create_and_close_but_set_no_target() -> None:
    for searcher in ("{name: single, metric: x}", "{name: random, metric: x, max_trials: 2}"):
        ops = make_search_method(config(searcher), 1).initial_operations()
        assert not any(isinstance(op, ValidateAfter) for op in ops)
        creates = [op for op in ops if isinstance(op, Create)]
        assert creates and len([op for op in ops if isinstance(op, Close)]) == len(creates)


def test_an_open_ended_trial_steps_until_its_script_finishes_then_checkpoints_and_terminates() -> None:
    seq = TrialSequencer(batches_per_step=100, open_ended=True)
    seq.close()
    assert seq.next_workload().kind is Kind.RUN_STEP
    seq.on_step_completed(1, 100)
    assert seq.next_workload().total_batches == 200
    seq.on_step_completed(2, 137)
    seq.finish(137)
    nxt = seq.next_workload()
    assert (nxt.kind, nxt.total_batches) == (Kind.CHECKPOINT_MODEL, 137)
    seq.on_checkpoint_completed(137)
    assert seq.next_workload().kind is Kind.TERMINATE
    seq.on_terminate_sent()
    assert seq.completed


def test_an_open_ended_trial_stopped_before_its_script_finished_is_not_completed() -> None:
    seq = TrialSequencer(batches_per_step=100, open_ended=True)
    seq.close()
    seq.on_step_completed(1, 30)
    seq.request_stop()
    assert seq.next_workload().kind is Kind.CHECKPOINT_MODEL
    seq.on_checkpoint_completed(30)
    assert seq.next_workload().kind is Kind.TERMINATE
    seq.on_terminate_sent()
    assert not seq.completed


def test_a_script_that_finishes_before_its_target_is_validated_where_it_stopped() -> None:
    seq = TrialSequencer(batches_per_step=100)
    seq.add_target(500)
    seq.close()
    seq.on_step_completed(1, 80)
    seq.finish(80)
    nxt = seq.next_workload()
    assert (nxt.kind, nxt.total_batches) == (Kind.COMPUTE_VALIDATION_METRICS, 80)
    assert seq.on_validation_completed(80)


def test_legacy_operations_are_the_max_length_or_every_asha_rung() -> None:
    assert operation_lengths(config("{name: single, metric: x, max_length: 100}")) == [100]
    assert operation_lengths(config("{name: single, metric: x}")) == []
    asha = config("{name: adaptive_asha, metric: x, max_trials: 16, max_length: 64, max_rungs: 3}")
    assert operation_lengths(asha) == [4, 16, 64]
    timed = config("{name: adaptive_asha, metric: x, max_trials: 4, time_metric: t, max_time: 64}")
    assert operation_lengths(timed) == []
