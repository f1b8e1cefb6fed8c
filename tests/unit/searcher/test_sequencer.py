"""Workload sequencing: what a trial is told to do, in what order, with absolute targets."""

import random

import pytest

from pedl.sequencer import Kind, TrialSequencer


def run(seq: TrialSequencer, on_validation=None) -> list[tuple[str, int]]:
    """Plays the harness: completes each workload until TERMINATE or a wait on the searcher."""
    out = []
    while (nxt := seq.next_workload()) is not None:
        out.append((nxt.kind.value, nxt.total_batches))
        if nxt.kind is Kind.RUN_STEP:
            seq.on_step_completed(nxt.step_id, nxt.total_batches)
        elif nxt.kind is Kind.COMPUTE_VALIDATION_METRICS:
            if seq.on_validation_completed(nxt.total_batches) and on_validation:
                on_validation(seq, nxt.total_batches)
        elif nxt.kind is Kind.CHECKPOINT_MODEL:
            seq.on_checkpoint_completed(nxt.total_batches)
        else:
            seq.on_terminate_sent()
    return out


def close_at_end(seq: TrialSequencer, _: int) -> None:
    seq.close()


def test_steps_run_to_the_target_then_validate_checkpoint_and_terminate() -> None:
    seq = TrialSequencer(batches_per_step=100)
    seq.add_target(250)
    assert run(seq, close_at_end) == [
        ("RUN_STEP", 100),
        ("RUN_STEP", 200),
        ("RUN_STEP", 250),
        ("COMPUTE_VALIDATION_METRICS", 250),
        ("CHECKPOINT_MODEL", 250),
        ("TERMINATE", 250),
    ]


def test_min_validation_and_checkpoint_periods_interleave_with_steps() -> None:
    seq = TrialSequencer(batches_per_step=50, min_validation_period=100, min_checkpoint_period=150)
    seq.add_target(200)
    assert run(seq, close_at_end) == [
        ("RUN_STEP", 50),
        ("RUN_STEP", 100),
        ("COMPUTE_VALIDATION_METRICS", 100),
        ("RUN_STEP", 150),
        ("CHECKPOINT_MODEL", 150),
        ("RUN_STEP", 200),
        ("COMPUTE_VALIDATION_METRICS", 200),
        ("CHECKPOINT_MODEL", 200),
        ("TERMINATE", 200),
    ]


def test_trial_waits_for_the_searcher_after_validating_its_target() -> None:
    seq = TrialSequencer(batches_per_step=100)
    seq.add_target(100)
    assert run(seq) == [("RUN_STEP", 100), ("COMPUTE_VALIDATION_METRICS", 100)]
    assert seq.next_workload() is None
    seq.add_target(300)  # e.g. an ASHA promotion
    assert run(seq, close_at_end)[:2] == [("RUN_STEP", 200), ("RUN_STEP", 300)]


def test_restart_resumes_from_the_checkpoint_with_absolute_targets() -> None:
    seq = TrialSequencer(batches_per_step=100, min_checkpoint_period=200)
    seq.add_target(500)
    for _ in range(4):  # 100, 200, ckpt 200, 300
        nxt = seq.next_workload()
        assert nxt is not None
        if nxt.kind is Kind.RUN_STEP:
            seq.on_step_completed(nxt.step_id, nxt.total_batches)
        else:
            seq.on_checkpoint_completed(nxt.total_batches)
    assert seq.batches_trained == 300
    seq.restart_from(checkpoint_batches=200, checkpoint_step_id=2)
    nxt = seq.next_workload()
    assert (nxt.kind, nxt.step_id, nxt.total_batches) == (Kind.RUN_STEP, 3, 300)


def test_state_round_trips_through_a_dict() -> None:
    seq = TrialSequencer(batches_per_step=10, min_validation_period=20)
    seq.add_target(40)
    seq.on_step_completed(1, 10)
    assert TrialSequencer.from_dict(seq.to_dict()) == seq


def test_a_stop_request_checkpoints_unsaved_work_then_terminates_and_resumes_later() -> None:
    seq = TrialSequencer(batches_per_step=100)
    seq.add_target(500)
    nxt = seq.next_workload()
    seq.on_step_completed(nxt.step_id, nxt.total_batches)
    seq.request_stop()  # e.g. the experiment was paused
    assert [(k, b) for k, b in run(seq)] == [("CHECKPOINT_MODEL", 100), ("TERMINATE", 100)]
    seq.restart_from(checkpoint_batches=100, checkpoint_step_id=1)
    nxt = seq.next_workload()
    assert (nxt.kind, nxt.total_batches) == (Kind.RUN_STEP, 200)


def test_a_stop_right_after_a_checkpoint_needs_no_second_one() -> None:
    seq = TrialSequencer(batches_per_step=100, min_checkpoint_period=100)
    seq.add_target(500)
    assert run_until_checkpoint(seq) == 100
    seq.request_stop()
    assert seq.next_workload().kind is Kind.TERMINATE


def run_until_checkpoint(seq: TrialSequencer) -> int:
    while True:
        nxt = seq.next_workload()
        if nxt.kind is Kind.RUN_STEP:
            seq.on_step_completed(nxt.step_id, nxt.total_batches)
        elif nxt.kind is Kind.CHECKPOINT_MODEL:
            seq.on_checkpoint_completed(nxt.total_batches)
            return nxt.total_batches


def test_a_run_restarted_behind_an_answered_target_trains_back_to_it_before_closing() -> None:
    seq = TrialSequencer(batches_per_step=10, min_checkpoint_period=30)
    seq.add_target(40)
    assert run(seq)[-1] == ("COMPUTE_VALIDATION_METRICS", 40)  # answered; checkpoint only at 30
    seq.close()
    seq.restart_from(checkpoint_batches=30, checkpoint_step_id=3)  # e.g. the agent was lost
    assert run(seq) == [("RUN_STEP", 40), ("CHECKPOINT_MODEL", 40), ("TERMINATE", 40)]


def test_a_requested_checkpoint_lost_to_a_restart_is_taken_at_the_requested_batch() -> None:
    """A PBT child waits for its parent's state at the round end (batch 20); the parent's run dies
    before saving it, restarts from scratch with a longer target, and must still save batch 20."""
    seq = TrialSequencer(batches_per_step=15)
    seq.add_target(20)
    assert run(seq) == [("RUN_STEP", 15), ("RUN_STEP", 20), ("COMPUTE_VALIDATION_METRICS", 20)]
    seq.request_checkpoint()
    seq.add_target(40)
    seq.restart_from(checkpoint_batches=0, checkpoint_step_id=0)
    assert run(seq)[:4] == [
        ("RUN_STEP", 15),
        ("RUN_STEP", 20),
        ("CHECKPOINT_MODEL", 20),
        ("RUN_STEP", 35),
    ]
    assert not seq.checkpoint_requested


# ---- pipelining: workloads sent behind the one running ------------------------------------------


def complete(seq: TrialSequencer, nxt) -> bool:
    """Applies a workload's result as the scheduler does; True when it answered the searcher."""
    if nxt.kind is Kind.RUN_STEP:
        seq.on_step_completed(nxt.step_id, nxt.total_batches)
    elif nxt.kind is Kind.COMPUTE_VALIDATION_METRICS:
        return seq.on_validation_completed(nxt.total_batches)
    elif nxt.kind is Kind.CHECKPOINT_MODEL:
        seq.on_checkpoint_completed(nxt.total_batches)
    return False


def run_pipelined(seq: TrialSequencer, on_validation=None) -> list[list[tuple[str, int]]]:
    """Plays the scheduler with pipelining: each send is the list `pipeline` returned; results come
    back one at a time, and after each the scheduler sends what is decided behind the rest."""
    sends: list[list[tuple[str, int]]] = []
    outstanding: list = []
    while True:
        batch = seq.pipeline(outstanding)
        for nxt in batch:
            if nxt.kind is Kind.TERMINATE:
                seq.on_terminate_sent()
            else:
                outstanding.append(nxt)
        if batch:
            sends.append([(n.kind.value, n.total_batches) for n in batch])
        if not outstanding:
            return sends
        done = outstanding.pop(0)
        if complete(seq, done) and on_validation:
            on_validation(seq, done.total_batches)


def test_the_validation_at_a_target_is_sent_with_the_step_that_reaches_it() -> None:
    seq = TrialSequencer(batches_per_step=100)
    seq.add_target(200)
    assert run_pipelined(seq, close_at_end) == [
        [("RUN_STEP", 100)],  # the target is not reached: a step is never queued behind a step
        [("RUN_STEP", 200), ("COMPUTE_VALIDATION_METRICS", 200)],
        [("CHECKPOINT_MODEL", 200), ("TERMINATE", 200)],  # after the searcher closed the trial
    ]


def test_a_trial_closed_up_front_gets_everything_after_its_last_step_at_once() -> None:
    seq = TrialSequencer(batches_per_step=100)
    seq.add_target(200)
    seq.close()  # random, grid, single: the trial's whole life is decided when it is created
    assert run_pipelined(seq) == [
        [("RUN_STEP", 100)],
        [
            ("RUN_STEP", 200),
            ("COMPUTE_VALIDATION_METRICS", 200),
            ("CHECKPOINT_MODEL", 200),
            ("TERMINATE", 200),
        ],
    ]
    assert seq.completed


def test_a_trial_closed_up_front_but_stopped_before_its_target_is_not_completed() -> None:
    seq = TrialSequencer(batches_per_step=100)
    seq.add_target(200)
    seq.close()
    (step,) = seq.pipeline([])
    seq.request_stop()  # preempted or paused during its first step
    complete(seq, step)
    assert [(n.kind, n.total_batches) for n in seq.pipeline([])] == [
        (Kind.CHECKPOINT_MODEL, 100),
        (Kind.TERMINATE, 100),
    ]
    seq.on_checkpoint_completed(100)
    seq.on_terminate_sent()
    assert seq.terminated and not seq.completed  # it resumes later, from batch 100


def test_nothing_is_queued_behind_a_validation_the_searcher_must_hear() -> None:
    seq = TrialSequencer(batches_per_step=100)
    seq.add_target(100)
    step, validation = seq.pipeline([])
    assert seq.pipeline([step, validation]) == []
    complete(seq, step)
    assert seq.pipeline([validation]) == []
    assert complete(seq, validation)
    seq.add_target(300)  # e.g. an ASHA promotion, decided on that validation
    assert [(n.kind, n.total_batches) for n in seq.pipeline([])] == [(Kind.RUN_STEP, 200)]


def test_periodic_validations_and_checkpoints_queue_behind_their_step() -> None:
    seq = TrialSequencer(batches_per_step=50, min_validation_period=100, min_checkpoint_period=100)
    seq.add_target(200)
    assert run_pipelined(seq, close_at_end) == [
        [("RUN_STEP", 50)],
        [("RUN_STEP", 100), ("COMPUTE_VALIDATION_METRICS", 100), ("CHECKPOINT_MODEL", 100)],
        [("RUN_STEP", 150)],
        [("RUN_STEP", 200), ("COMPUTE_VALIDATION_METRICS", 200)],
        [("CHECKPOINT_MODEL", 200), ("TERMINATE", 200)],
    ]


def test_a_stop_requested_while_a_step_runs_queues_checkpoint_and_terminate_behind_it() -> None:
    seq = TrialSequencer(batches_per_step=100)
    seq.add_target(500)
    (step,) = seq.pipeline([])
    seq.request_stop()  # e.g. a pause: the step's end is where the trial stops
    assert [(n.kind, n.total_batches) for n in seq.pipeline([step])] == [
        (Kind.CHECKPOINT_MODEL, 100),
        (Kind.TERMINATE, 100),
    ]


def test_a_stop_waits_for_the_searcher_to_hear_a_pending_validation() -> None:
    seq = TrialSequencer(batches_per_step=100)
    seq.add_target(100)
    step, validation = seq.pipeline([])
    seq.request_stop()
    assert seq.pipeline([step, validation]) == []


@pytest.mark.parametrize("seed", range(40))
def test_pipelining_sends_exactly_the_workloads_of_one_at_a_time_in_the_same_order(seed: int) -> None:
    """Whatever the periods and the searcher's reactions, the harness runs the same workloads."""
    rng = random.Random(seed)
    config = dict(
        batches_per_step=rng.choice([10, 25, 40]),
        min_validation_period=rng.choice([0, 20, 50]),
        min_checkpoint_period=rng.choice([0, 30, 60]),
    )
    lengths = sorted(rng.sample(range(10, 200, 10), rng.randint(1, 4)))

    def searcher(seq: TrialSequencer, length: int) -> None:
        later = [n for n in lengths if n > length]
        if later:
            seq.add_target(later[0])
        else:
            seq.close()

    one_by_one = TrialSequencer(**config)
    one_by_one.add_target(lengths[0])
    pipelined = TrialSequencer(**config)
    pipelined.add_target(lengths[0])
    sends = run_pipelined(pipelined, searcher)
    assert [w for batch in sends for w in batch] == run(one_by_one, searcher)
    assert pipelined == one_by_one


def test_initial_validation_comes_before_the_first_step() -> None:
    seq = TrialSequencer(batches_per_step=100, initial_validation=True)
    seq.add_target(200)
    assert run(seq, close_at_end) == [
        ("COMPUTE_VALIDATION_METRICS", 0),
        ("RUN_STEP", 100),
        ("RUN_STEP", 200),
        ("COMPUTE_VALIDATION_METRICS", 200),
        ("CHECKPOINT_MODEL", 200),
        ("TERMINATE", 200),
    ]
    # Stored with the trial: a restart before any checkpoint does not validate at batch 0 again.
    again = TrialSequencer.from_dict(seq.to_dict())
    again.restart_from(0, 0)
    again.terminated = False
    assert again.next_workload() is None or again.next_workload().kind is not Kind.COMPUTE_VALIDATION_METRICS


def test_checkpoint_policy_all_checkpoints_after_every_validation() -> None:
    seq = TrialSequencer(batches_per_step=100, min_validation_period=100, checkpoint_after_validation=True)
    seq.add_target(300)
    assert run(seq, close_at_end) == [
        ("RUN_STEP", 100),
        ("COMPUTE_VALIDATION_METRICS", 100),
        ("CHECKPOINT_MODEL", 100),
        ("RUN_STEP", 200),
        ("COMPUTE_VALIDATION_METRICS", 200),
        ("CHECKPOINT_MODEL", 200),
        ("RUN_STEP", 300),
        ("COMPUTE_VALIDATION_METRICS", 300),
        ("CHECKPOINT_MODEL", 300),
        ("TERMINATE", 300),
    ]


def test_checkpoint_policy_best_checkpoints_after_validations_better_than_all_before() -> None:
    """Determined: a checkpoint after every validation that beats all earlier ones of the experiment."""
    seq = TrialSequencer(
        batches_per_step=100, min_validation_period=100, checkpoint_after_best_validation=True
    )
    seq.add_target(400)
    best_at = {100, 300}  # what the scheduler says, having compared with every trial's validations
    out = []
    while (nxt := seq.next_workload()) is not None:
        out.append((nxt.kind.value, nxt.total_batches))
        assert seq.pipeline([])[0] == nxt
        if nxt.kind is Kind.RUN_STEP:
            seq.on_step_completed(nxt.step_id, nxt.total_batches)
        elif nxt.kind is Kind.COMPUTE_VALIDATION_METRICS:
            # Nothing is queued behind a validation: whether a checkpoint follows it is not known yet.
            assert seq.pipeline([nxt]) == []
            if seq.on_validation_completed(nxt.total_batches, best=nxt.total_batches in best_at):
                seq.close()
        elif nxt.kind is Kind.CHECKPOINT_MODEL:
            seq.on_checkpoint_completed(nxt.total_batches)
        else:
            seq.on_terminate_sent()
    assert out == [
        ("RUN_STEP", 100),
        ("COMPUTE_VALIDATION_METRICS", 100),
        ("CHECKPOINT_MODEL", 100),
        ("RUN_STEP", 200),
        ("COMPUTE_VALIDATION_METRICS", 200),
        ("RUN_STEP", 300),
        ("COMPUTE_VALIDATION_METRICS", 300),
        ("CHECKPOINT_MODEL", 300),
        ("RUN_STEP", 400),
        ("COMPUTE_VALIDATION_METRICS", 400),
        ("CHECKPOINT_MODEL", 400),  # the trial's end is checkpointed under every policy
        ("TERMINATE", 400),
    ]


def test_sequencer_options_come_from_the_config() -> None:
    from pedl.config import parse_experiment_config

    config = parse_experiment_config(
        "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n"
        "perform_initial_validation: true\ncheckpoint_policy: all\nmin_validation_period: {batches: 5}\n"
    )
    seq = TrialSequencer.for_config(config)
    assert (seq.initial_validation, seq.checkpoint_after_validation, seq.min_validation_period) == (
        True,
        True,
        5,
    )
    assert TrialSequencer.from_dict({k: v for k, v in seq.to_dict().items() if k != "initial_validation"})
    best = parse_experiment_config(
        "searcher: {name: single, metric: loss, max_length: {batches: 10}}\ncheckpoint_policy: best\n"
    )
    assert TrialSequencer.for_config(best).checkpoint_after_best_validation


def test_a_trial_that_ends_itself_is_checkpointed_then_terminated_short_of_its_length() -> None:
    """Determined's set_stop_requested(True): finish the step, checkpoint, exit; not 'completed'
    (the searcher hears an early exit), and the reason outlives a restarted run."""
    seq = TrialSequencer(batches_per_step=10)
    seq.add_target(50)
    seq.close()
    step = seq.next_workload()
    assert step is not None and (step.kind, step.total_batches) == (Kind.RUN_STEP, 10)
    seq.on_step_completed(step.step_id, 10)
    assert seq.exit_early("USER_REQUESTED_STOP")
    assert not seq.exit_early("INVALID_HP")  # the first reason stands
    restored = TrialSequencer.from_dict(seq.to_dict())
    assert restored.early_exit == "USER_REQUESTED_STOP"
    assert run(restored) == [("CHECKPOINT_MODEL", 10), ("TERMINATE", 10)]
    assert restored.exited_early and not restored.completed
    # A run that failed after the request resumes from its checkpoint straight to the exit.
    restored.restart_from(10, 1)
    assert run(restored) == [("TERMINATE", 10)]


def test_an_early_exit_before_training_anything_needs_no_checkpoint() -> None:
    seq = TrialSequencer(batches_per_step=10)
    seq.add_target(50)
    seq.exit_early("INVALID_HP")
    assert run(seq) == [("TERMINATE", 0)]
    assert seq.exited_early


def test_a_stop_asked_at_the_last_step_of_a_closed_trial_still_completes_it() -> None:
    """The trial reached its length anyway: the searcher hears it closed, not an early exit."""
    seq = TrialSequencer(batches_per_step=10)
    seq.add_target(20)
    seq.close()
    seq.on_step_completed(2, 20)
    seq.on_validation_completed(20)
    seq.exit_early("USER_REQUESTED_STOP")
    assert run(seq) == [("CHECKPOINT_MODEL", 20), ("TERMINATE", 20)]
    assert seq.completed and not seq.exited_early
