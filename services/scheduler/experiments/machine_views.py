"""The live runtime objects seen as the state machine's typed state (`machine.Experiment`), and the
machine's new state written back onto them: the only place the two meet."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pedl_scheduler.experiments import machine
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime


def trial_view(trial: TrialRuntime) -> machine.Trial:
    sequencer = trial.sequencer
    return machine.Trial(
        id=trial.id,
        request_id=trial.request_id,
        running=trial.running,
        gang=bool(trial.peers),
        killing=trial.killing,
        state=trial.state,
        restarts=trial.restarts,
        infrastructure_failures=trial.infrastructure_failures,
        last_failure=trial.last_failure,
        terminated=sequencer.terminated,
        completed=sequencer.completed,
        exited_early=sequencer.exited_early,
        early_exit=sequencer.early_exit or "",
        batches_trained=sequencer.batches_trained,
    )


def experiment_view(exp: ExperimentRuntime, trials: Iterable[TrialRuntime]) -> machine.Experiment:
    """The experiment with the live trials an event concerns (not every trial of a large search)."""
    return machine.Experiment(
        id=exp.id,
        state=exp.state,
        max_restarts=exp.config.max_restarts,
        trials={t.id: trial_view(t) for t in trials},
        searcher_done=exp.searcher_done,
        searcher_failed=exp.searcher_failed,
    )


def absorb(exp: ExperimentRuntime, trials: Mapping[int, TrialRuntime], state: machine.Experiment) -> None:
    """Writes the machine's decisions about the experiment and its trials back onto the runtime
    (rows are the effects' job; the trial's lifecycle state moves with SetTrialState and EndTrial)."""
    exp.state = state.state
    exp.searcher_done, exp.searcher_failed = state.searcher_done, state.searcher_failed
    for view in state.trials.values():
        trial = trials.get(view.id)
        if trial is None:
            continue
        trial.killing = view.killing
        trial.restarts = view.restarts
        trial.infrastructure_failures = view.infrastructure_failures
        trial.last_failure = view.last_failure
        if view.early_exit and not trial.sequencer.early_exit:
            trial.sequencer.exit_early(view.early_exit)
