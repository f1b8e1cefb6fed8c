"""The experiment's decisions as one pure state machine: `handle(state, event) -> (state, effects)`.

Events are what arrives (a run's exit, an agent lost, refused results, a user's pause, activate or
kill, the searcher's operations, a checkpoint stored); effects are what must happen (kill a run, end
a trial, tell the searcher, restart after a backoff, create trials, set targets, hand a checkpoint
to waiting children). Nothing here touches the database, an agent or a clock: the rooms turn what
they receive into events, and the effects into rows and agent messages inside their `UnitOfWork`.
The state is the part of the experiment an event can change, so tables of (state, event) ->
(state, effects) test every rule users rely on without a cluster.

The restart policy lives here (`_failed`): a failure of the trial's own code spends `max_restarts`,
one the infrastructure caused (agent lost, checkpoint store unreachable) restarts without spending
one, and one that repeats before training or that no restart can cure ends the trial at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pedl.harness.failure import INVALID_HP
from pedl.searcher import Close, Create, Operation, Resume, Shutdown, ValidateAfter
from pedl_scheduler.experiments import early_exit, run_exits
from pedl_scheduler.experiments.failures import RunFailure, fails_deterministically
from pedl_scheduler.experiments.restart_policy import infrastructure_cause

# ---- state ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    """What the decisions read of a live trial."""

    id: int
    request_id: str
    running: bool = False
    gang: bool = False  # its run spans several agents
    killing: bool = False  # `det trial kill` or the experiment's kill: its exit ends it CANCELED
    state: str = "ACTIVE"  # ACTIVE or PAUSED
    restarts: int = 0  # failures of its own code so far (what max_restarts bounds)
    infrastructure_failures: int = 0  # in a row, reset by its next result
    last_failure: RunFailure | None = None
    # Its sequencer: told to exit (terminated), with all its work done (completed), or ended short of
    # it by its own code (exited_early), the first reason its code gave (early_exit.NAMES), how far it got.
    terminated: bool = False
    completed: bool = False
    exited_early: bool = False
    early_exit: str = ""
    batches_trained: int = 0


@dataclass(frozen=True)
class Experiment:
    """The experiment and the live trials an event concerns (keyed by trial id)."""

    id: int
    state: str = "ACTIVE"  # ACTIVE, PAUSED or CANCELED while it lives
    max_restarts: int = 5
    trials: Mapping[int, Trial] = dataclasses.field(default_factory=dict)
    # The searcher said Shutdown (its search is over), and whether it failed.
    searcher_done: bool = False
    searcher_failed: bool = False

    def trial(self, trial_id: int) -> Trial:
        return self.trials[trial_id]

    def with_trial(self, trial: Trial) -> Experiment:
        return dataclasses.replace(self, trials={**self.trials, trial.id: trial})


# ---- events -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunExited:
    """A trial's run ended (every member of a gang has reported, or the rest were given up on).
    `infrastructure`: why the infrastructure failed it, when the scheduler knows (an agent lost)."""

    trial_id: int
    exit_code: int
    error: str = ""
    killed: bool = False
    failure: RunFailure | None = None
    infrastructure: str = ""


@dataclass(frozen=True)
class AgentLost:
    """The agent of the trial's run (or of one gang member) did not come back within the reconnect
    grace: the run is gone, failed by the infrastructure, so it restarts without spending max_restarts."""

    trial_id: int
    agent_id: str

    def as_exit(self) -> RunExited:
        lost = f"agent {self.agent_id} was lost"
        return RunExited(self.trial_id, exit_code=-1, error=lost, infrastructure=lost)


@dataclass(frozen=True)
class ResultsRefused:
    """The scheduler found a problem in what the trial reported (a metric it cannot use)."""

    trial_id: int
    reason: str


@dataclass(frozen=True)
class TrialKillRequested:
    """`det trial kill`: the trial ends CANCELED and the search goes on without it."""

    trial_id: int


@dataclass(frozen=True)
class ExperimentKillRequested:
    """`det experiment kill`: every live trial ends CANCELED (a running one once its run exits)."""


@dataclass(frozen=True)
class PauseRequested:
    """`det experiment pause`: running trials checkpoint at their next step boundary and exit."""


@dataclass(frozen=True)
class ActivateRequested:
    """`det experiment activate` of a paused experiment: its trials are scheduled again."""


@dataclass(frozen=True)
class SearcherDecided:
    """The searcher's operations, in its order (what it answered to its first call, a validation, a
    trial's close, early exit, creation or revival)."""

    ops: Sequence[Operation]


@dataclass(frozen=True)
class CheckpointStored:
    """A trial stored the checkpoint its waiting children (PBT exploit) asked for."""

    trial_id: int
    uuid: str
    batches: int
    step: int


RunEvent = RunExited | AgentLost | ResultsRefused
UserEvent = TrialKillRequested | ExperimentKillRequested | PauseRequested | ActivateRequested
Event = RunEvent | UserEvent | SearcherDecided | CheckpointStored

# ---- effects ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class KillRun:
    """Ask every agent of the trial's current run to kill it."""

    trial_id: int


@dataclass(frozen=True)
class RequestStop:
    """Checkpoint at the next step boundary, then exit (the trial resumes later)."""

    trial_id: int


@dataclass(frozen=True)
class EndTrial:
    """The trial ends for good; `cause`: why a COMPLETED trial ended early (early_exit.NAMES)."""

    trial_id: int
    state: Literal["COMPLETED", "CANCELED", "ERROR"]
    error: str = ""
    cause: str = ""


@dataclass(frozen=True)
class TellSearcher:
    """The searcher hears that the trial closed (its work done) or exited early (`reason`)."""

    trial_id: int
    call: Literal["on_trial_closed", "on_trial_exited_early"]
    reason: str = ""


@dataclass(frozen=True)
class Restart:
    """Queue the trial again after the backoff for `attempt`; `counted`: it spent a max_restarts
    (the restart line says so), else the infrastructure failed it for `why`."""

    trial_id: int
    attempt: int
    counted: bool
    why: str = ""


@dataclass(frozen=True)
class LogLine:
    trial_id: int
    text: str
    source: str = "pedl"


@dataclass(frozen=True)
class SaveTrial:
    """Write the trial's row (a run that stopped to resume later)."""

    trial_id: int


@dataclass(frozen=True)
class SetTrialState:
    trial_id: int
    state: Literal["ACTIVE", "PAUSED"]


@dataclass(frozen=True)
class SetExperimentState:
    state: Literal["ACTIVE", "PAUSED", "CANCELED"]


@dataclass(frozen=True)
class Settle:
    """The experiment may have ended: no live trial left and its search over (see `experiment_end`)."""


@dataclass(frozen=True)
class Wake:
    """Run the scheduling loop soon (slots were freed, or trials may run again)."""


@dataclass(frozen=True)
class CreateTrials:
    """Insert the searcher's new trials together (one round trip), each with the targets and the close
    decided with it; then the searcher hears each was created (its answer is a new SearcherDecided)."""

    batch: tuple[tuple[Create, tuple[ValidateAfter | Close, ...]], ...]


@dataclass(frozen=True)
class SetTarget:
    """A live trial trains on to a new validation target, or is closed (finishes what it was given)."""

    op: ValidateAfter | Close


@dataclass(frozen=True)
class ReopenTrial:
    """The searcher takes back a trial it closed (ASHA promotion): it continues from its checkpoint."""

    request_id: str


@dataclass(frozen=True)
class SaveSearcher:
    """Write the searcher's journal with this transaction (a restarted scheduler resumes it exactly)."""


@dataclass(frozen=True)
class HandOffCheckpoint:
    """The children waiting on the trial copy its stored checkpoint and may start."""

    stored: CheckpointStored


TrialEffect = KillRun | RequestStop | EndTrial | TellSearcher | Restart | LogLine | SaveTrial | SetTrialState
SearchEffect = CreateTrials | SetTarget | ReopenTrial | SaveSearcher | HandOffCheckpoint
Effect = TrialEffect | SearchEffect | SetExperimentState | Settle | Wake
Result = tuple[Experiment, list[Effect]]

# ---- the machine ------------------------------------------------------------------------------


def handle(state: Experiment, event: Event) -> Result:
    """The experiment after `event`, and what must happen for it."""
    if isinstance(event, RunExited):
        return _run_exited(state, event)
    if isinstance(event, AgentLost):
        return _run_exited(state, event.as_exit())
    if isinstance(event, ResultsRefused):
        trial = state.trial(event.trial_id)
        return state.with_trial(dataclasses.replace(trial, running=False)), [
            KillRun(trial.id),
            LogLine(trial.id, f"trial {trial.id} failed: {event.reason}"),
            EndTrial(trial.id, "ERROR", event.reason),
            TellSearcher(trial.id, "on_trial_exited_early"),
            Settle(),
            Wake(),
        ]
    if isinstance(event, TrialKillRequested):
        return _kill_trial(state, event.trial_id)
    if isinstance(event, ExperimentKillRequested):
        return _kill_experiment(state)
    if isinstance(event, PauseRequested):
        return _pause(state)
    if isinstance(event, SearcherDecided):
        return _searcher_decided(state, list(event.ops))
    if isinstance(event, CheckpointStored):
        return state, [HandOffCheckpoint(event)]
    return _activate(state)


def _searcher_decided(state: Experiment, pending: list[Operation]) -> Result:
    """The searcher's operations as effects, in its order. Consecutive new trials are created together,
    each with the targets and close that follow it; a Shutdown ends the search (the experiment ends
    once its trials have: `experiment_end`)."""
    effects: list[Effect] = []
    done, failed = state.searcher_done, state.searcher_failed
    while pending:
        op = pending.pop(0)
        if isinstance(op, Create):
            batch: list[tuple[Create, tuple[ValidateAfter | Close, ...]]] = []
            create: Create | None = op
            while create is not None:
                decided: list[ValidateAfter | Close] = []
                while pending and isinstance(head := pending[0], (ValidateAfter, Close)):
                    if head.request_id != create.request_id:
                        break
                    decided.append(head)
                    pending.pop(0)
                batch.append((create, tuple(decided)))
                following = pending[0] if pending else None
                create = following if isinstance(following, Create) else None
                if create is not None:
                    pending.pop(0)
            effects.append(CreateTrials(tuple(batch)))
        elif isinstance(op, Resume):
            effects.append(ReopenTrial(op.request_id))
        elif isinstance(op, (ValidateAfter, Close)):
            effects.append(SetTarget(op))
        elif isinstance(op, Shutdown):
            done, failed = True, failed or op.failure
    new = dataclasses.replace(state, searcher_done=done, searcher_failed=failed)
    return new, [*effects, SaveSearcher(), Settle()]


def _run_exited(state: Experiment, event: RunExited) -> Result:
    trial = dataclasses.replace(state.trial(event.trial_id), running=False)
    effects: list[Effect] = []
    if trial.gang and not (event.exit_code == 0 and trial.terminated):
        effects.append(KillRun(trial.id))  # one member of a gang failed: the others cannot go on
    if trial.killing:
        effects.append(EndTrial(trial.id, "CANCELED"))
        if state.state != "CANCELED":  # `det trial kill`: the search goes on without it
            effects.append(TellSearcher(trial.id, "on_trial_exited_early"))
    elif event.exit_code == 0 and trial.exited_early:
        trial = dataclasses.replace(trial, last_failure=None)
        effects.extend(_ended_early(trial, trial.early_exit))
    elif event.exit_code == 0 and trial.terminated and not trial.completed:
        text = (
            f"trial {trial.id} stopped at batch {trial.batches_trained}; "
            "it resumes from its checkpoint when scheduled again"
        )
        trial = dataclasses.replace(trial, last_failure=None)
        effects += [LogLine(trial.id, text), SaveTrial(trial.id)]
    elif event.exit_code == 0 and trial.terminated:
        effects += [EndTrial(trial.id, "COMPLETED"), TellSearcher(trial.id, "on_trial_closed")]
    else:
        reason = event.error.strip() or f"the trial process exited with code {event.exit_code}"
        if event.exit_code == 0:
            reason = "the trial process exited before it was told to stop"
        cause = event.infrastructure or infrastructure_cause(event.exit_code)
        if cause:
            trial = dataclasses.replace(trial, infrastructure_failures=trial.infrastructure_failures + 1)
            effects.append(
                Restart(
                    trial.id,
                    trial.infrastructure_failures,
                    counted=False,
                    why=run_exits.infrastructure_cause_text(cause, reason),
                )
            )
        else:
            trial, more = _failed(trial, state.max_restarts, reason, event.failure)
            effects += more
    return state.with_trial(trial), [*effects, Settle(), Wake()]


def _ended_early(trial: Trial, reason: str) -> list[Effect]:
    """The trial's code ended it: it completed, short of its length; the searcher hears it exited early."""
    return [
        LogLine(trial.id, early_exit.ended_line(trial.id, reason, trial.batches_trained)),
        EndTrial(trial.id, "COMPLETED", cause=reason),
        TellSearcher(trial.id, "on_trial_exited_early", reason),
    ]


def _failed(
    trial: Trial, max_restarts: int, reason: str, failure: RunFailure | None
) -> tuple[Trial, list[Effect]]:
    """The trial's own code failed the run: it restarts, unless restarts are used up or cannot help."""
    if failure is not None and failure.exception_type == INVALID_HP:  # det.InvalidHP: no failure
        trial = dataclasses.replace(trial, early_exit=trial.early_exit or "INVALID_HP", last_failure=None)
        return trial, _ended_early(trial, trial.early_exit)  # the first reason stands
    previous = trial.last_failure
    trial = dataclasses.replace(trial, last_failure=failure)
    give_up = [TellSearcher(trial.id, "on_trial_exited_early")]
    if failure is not None and failure.permanent:
        line = f"trial {trial.id} failed with {failure.describe()}, which no restart can cure"
        return trial, [
            LogLine(trial.id, line),
            EndTrial(trial.id, "ERROR", f"{reason} (not restarted)"),
            *give_up,
        ]
    if trial.restarts < max_restarts and failure is not None and fails_deterministically(previous, failure):
        line = (
            f"trial {trial.id} failed again with the same error ({failure.describe()}) before training "
            "any batch; it is not restarted, since every run would fail the same way"
        )
        error = (
            f"{reason} (the run before failed the same way, also before training any batch: not restarted "
            f"after {trial.restarts} of max_restarts {max_restarts})"
        )
        return trial, [LogLine(trial.id, line), EndTrial(trial.id, "ERROR", error), *give_up]
    failed = LogLine(trial.id, f"trial {trial.id} failed: {reason}")
    if trial.restarts < max_restarts:
        trial = dataclasses.replace(trial, restarts=trial.restarts + 1)
        return trial, [failed, Restart(trial.id, trial.restarts, counted=True)]
    if max_restarts:
        reason = f"{reason} (after {trial.restarts} restarts, max_restarts is {max_restarts})"
    return trial, [failed, EndTrial(trial.id, "ERROR", reason), *give_up]


def _kill_trial(state: Experiment, trial_id: int) -> Result:
    trial = state.trial(trial_id)
    if trial.killing:
        return state, []
    trial = dataclasses.replace(trial, killing=True)
    if trial.running:
        return state.with_trial(trial), [KillRun(trial.id), Wake()]  # its exit ends it (RunExited)
    effects: list[Effect] = [EndTrial(trial.id, "CANCELED"), TellSearcher(trial.id, "on_trial_exited_early")]
    return state.with_trial(trial), [*effects, Settle(), Wake()]


def _kill_experiment(state: Experiment) -> Result:
    effects: list[Effect] = [SetExperimentState("CANCELED")]
    trials = []
    for trial in state.trials.values():
        trials.append(dataclasses.replace(trial, killing=True))
        effects.append(KillRun(trial.id) if trial.running else EndTrial(trial.id, "CANCELED"))
    return _with(dataclasses.replace(state, state="CANCELED"), trials), [*effects, Settle()]


def _pause(state: Experiment) -> Result:
    if state.state != "ACTIVE":
        return state, []
    effects: list[Effect] = [SetExperimentState("PAUSED")]
    for trial in state.trials.values():
        if trial.running:
            effects.append(RequestStop(trial.id))
        effects.append(SetTrialState(trial.id, "PAUSED"))
    trials = [dataclasses.replace(t, state="PAUSED") for t in state.trials.values()]
    return _with(dataclasses.replace(state, state="PAUSED"), trials), effects


def _activate(state: Experiment) -> Result:
    if state.state != "PAUSED":
        return state, []
    effects: list[Effect] = [SetExperimentState("ACTIVE")]
    effects += [SetTrialState(t.id, "ACTIVE") for t in state.trials.values()]
    trials = [dataclasses.replace(t, state="ACTIVE") for t in state.trials.values()]
    return _with(dataclasses.replace(state, state="ACTIVE"), trials), [*effects, Wake()]


def _with(state: Experiment, trials: Sequence[Trial]) -> Experiment:
    return dataclasses.replace(state, trials={t.id: t for t in trials})


# ---- the experiment's end ---------------------------------------------------------------------


def experiment_end(
    state: str, live_trials: int, searcher_done: bool, searcher_failed: bool, trial_states: Sequence[str]
) -> tuple[str, str] | None:
    """How the experiment ends now (state, error), or None while it goes on: it ends once no trial
    is live and its search is over, or once it was killed; a searcher that finishes while runs are
    still exiting waits for them. One whose every trial a user killed ends CANCELED, as
    Determined's does, whatever its searcher made of trials that never finished."""
    if live_trials or (state != "CANCELED" and not searcher_done):
        return None
    if state == "CANCELED":
        return "CANCELED", ""
    if trial_states and all(s == "CANCELED" for s in trial_states):
        return "CANCELED", ""  # as Determined's: every trial killed (`det trial kill`) is no failure
    every_trial_failed = bool(trial_states) and all(s == "ERROR" for s in trial_states)
    if searcher_failed or every_trial_failed:
        return "ERROR", "every trial failed" if every_trial_failed else "the search failed"
    return "COMPLETED", ""
