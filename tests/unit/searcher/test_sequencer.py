"""Workload sequencing: what a trial is told to do, in what order, with absolute targets."""

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
