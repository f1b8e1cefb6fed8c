"""The one place the experiment manager's rooms meet: it builds them, and carries out in order what
they emit (`effects.Emit`): the state machine's effects (`machine.Effect`), the machine's events a
room observed (a lost agent, refused results) and what one room's work needs of another
(`effects.Step`). No room holds another; each holds only the shared `SchedulerState`, the one
`UnitOfWork` and this dispatcher's `perform`, so reading a room tells what it decides, and reading
`perform` tells which room carries out each kind of decision.

It also routes what arrives from outside to the room that takes it, where more than one room acts
on it (an agent's batch of messages, the scheduling loop's tick, start-up, activate, `det e set`).
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from pedl.config import ExperimentConfig
from pedl.searcher import Operation
from pedl.v1 import agent_pb2
from pedl_scheduler.cluster import AgentHandle
from pedl_scheduler.experiments import effects, machine, machine_views, recovery
from pedl_scheduler.experiments.adoption import RunAdoption
from pedl_scheduler.experiments.checkpoint_lifecycle import CheckpointLifecycle
from pedl_scheduler.experiments.lifecycle import ExperimentLifecycle
from pedl_scheduler.experiments.result_intake import ResultIntake
from pedl_scheduler.experiments.revival import Revival
from pedl_scheduler.experiments.scheduling_pass import SchedulingPass
from pedl_scheduler.experiments.search_driver import SearchDriver
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.trial_runs import TrialRuns
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime

log = structlog.get_logger(component="experiments")


class Dispatcher:
    def __init__(self, state: SchedulerState, work: UnitOfWork) -> None:
        self.state = state
        self.work = work
        emit = self.perform
        self.lifecycle = ExperimentLifecycle(state, work, emit)
        self.scheduling = SchedulingPass(state, work, emit)
        self.runs = TrialRuns(state, work, emit)
        self.adoption = RunAdoption(state, work, emit)
        self.intake = ResultIntake(state, work, emit)
        self.search = SearchDriver(state, work)
        self.checkpoints = CheckpointLifecycle(state, work)
        self.revival = Revival(state, work, emit)

    # ---- carrying out what the rooms emit ---------------------------------------------------

    def perform(
        self, exp: ExperimentRuntime, trials: Sequence[TrialRuntime], steps: Sequence[effects.Step]
    ) -> None:
        """Carries out `steps` about `exp` and `trials` (those they concern), in the order given, in
        the caller's unit of work: rows and log lines now, agent messages after its commit."""
        involved = {t.id: t for t in trials}
        for step in steps:
            trial = involved.get(getattr(step, "trial_id", -1))
            if isinstance(step, machine.Settle):
                self.settle(exp)
            elif isinstance(step, machine.Wake):
                self.state.wake.set()
                self.state.notify()
            elif isinstance(step, machine.SetExperimentState):
                self.lifecycle.record_state(exp, step.state)
            elif isinstance(step, (machine.SearcherDecided, machine.CheckpointStored)):
                self.decide(exp, step)
            elif isinstance(step, effects.ResumeWaits):
                self.search.resume_waits(exp)
            elif isinstance(step, machine.SearchEffect):
                self._perform_search(exp, step)
            elif trial is None:
                continue
            elif isinstance(step, machine.TellSearcher):
                args = (trial.request_id, step.reason) if step.reason else (trial.request_id,)
                self.decide(exp, machine.SearcherDecided(exp.journal.call(step.call, *args)))
            else:
                self._perform_on_trial(exp, trial, step)

    def decide(
        self, exp: ExperimentRuntime, event: machine.SearcherDecided | machine.CheckpointStored
    ) -> None:
        """The searcher's operations (or a stored checkpoint) through the state machine, its effects
        carried out in order; what the searcher answers to the trials they created is decided next,
        after the rest of the decision (the order the searcher's queue of operations has)."""
        while True:
            state, steps = machine.handle(machine_views.experiment_view(exp, []), event)
            machine_views.absorb(exp, {}, state)
            answers: list[Operation] = []
            for step in steps:
                if isinstance(step, machine.CreateTrials):
                    answers += self._create_trials(exp, step)
                else:
                    self.perform(exp, [], [step])
            if not answers:
                return
            event = machine.SearcherDecided(answers)

    def _create_trials(self, exp: ExperimentRuntime, step: machine.CreateTrials) -> list[Operation]:
        """The new trials' rows; what the searcher answers to hearing each was created."""
        created = self.search.create_trials(exp, step.batch)
        return [op for trial in created for op in exp.journal.call("on_trial_created", trial.request_id)]

    def _perform_search(self, exp: ExperimentRuntime, step: machine.SearchEffect) -> None:
        if isinstance(step, machine.SetTarget):
            self.search.set_target(exp, step.op)
        elif isinstance(step, machine.ReopenTrial):
            self.search.reopen(exp, step.request_id)
        elif isinstance(step, machine.SaveSearcher):
            self.work.save_searcher(exp)
        elif isinstance(step, machine.HandOffCheckpoint):
            stored = step.stored
            self.search.checkpoint_stored(stored.trial_id, stored.uuid, stored.batches, stored.step)
        else:  # CreateTrials outside `decide`: the searcher's answers are decided in turn
            answers = self._create_trials(exp, step)
            if answers:
                self.decide(exp, machine.SearcherDecided(answers))

    def _perform_on_trial(self, exp: ExperimentRuntime, trial: TrialRuntime, step: effects.Step) -> None:
        if isinstance(step, machine.KillRun):
            self.runs.kill_run(trial)
        elif isinstance(step, machine.RequestStop):
            self.runs.request_stop(trial)
        elif isinstance(step, machine.SetTrialState):
            self.runs.set_state(trial, step.state)
        elif isinstance(step, machine.EndTrial):
            self.runs.end_trial(trial, step.state, step.error, step.cause)
            self.search.parent_ended(trial.id)
            if exp.id in self.state.experiments:
                self.checkpoints.collect_garbage(exp)
        elif isinstance(step, machine.LogLine):
            self.work.log_line(trial, step.text, source=step.source)
        elif isinstance(step, machine.SaveTrial):
            self.work.save_trial(trial)
        elif isinstance(step, machine.Restart):
            self.runs.restart(trial, exp, step)
        elif isinstance(step, effects.StartRun):
            self.runs.start(trial, list(step.gang))
        elif isinstance(step, effects.EndStragglers):
            self.runs.end_straggling_gang(trial)
        elif isinstance(step, machine.AgentLost):
            self.runs.on_agent_lost(trial, step.agent_id)
        elif isinstance(step, machine.ResultsRefused):
            self.runs.run_ended(trial, step)

    def settle(self, exp: ExperimentRuntime) -> None:
        """Ends the experiment once no trial is live and its search is over (or it was killed), its
        save_* policy applied first."""
        end = self.lifecycle.ending(exp)
        if end is not None:
            self.checkpoints.collect_garbage(exp)
            self.lifecycle.end(exp, *end)

    # ---- what arrives, where more than one room acts on it ------------------------------------

    def recover(self) -> None:
        """At start-up: the active experiments rebuilt from the database, their live trials queued."""
        for row in recovery.live_experiments(self.state.db):
            exp = recovery.load(self.state, row)
            self.perform(exp, [], [effects.ResumeWaits()])
        self.checkpoints.load_lost()
        self.state.wake.set()

    def tick(self, now: float) -> None:
        """The scheduling loop's periodic work: lost runs, then one scheduling pass in one transaction."""
        self.state.wake.clear()
        self.adoption.expire_unconfirmed(now)
        with self.work.transaction():
            self.scheduling.schedule()

    def on_agent_messages(self, batch: Sequence[tuple[AgentHandle, agent_pb2.ConnectRequest]]) -> None:
        """Handles agent messages that arrived together, in order, in ONE transaction (group commit).

        Durability is that of one transaction per message: nothing the batch decided (workloads,
        starts, kills) leaves before the commit, and an agent that saw nothing cannot have acted on
        a result the scheduler then lost. A trial that ended in the batch frees its slots for the
        queued trials at once, not at the next scheduling tick.
        """
        with self.intake.batch(), self.work.transaction():
            self.work.db.will_write()
            for agent, message in batch:
                kind = message.WhichOneof("message")
                if kind == "trial_exited":
                    self.runs.on_trial_exited(agent, message.trial_exited)
                elif kind == "draining":
                    self.scheduling.drain(agent, message.draining.reason or f"agent {agent.id} leaves")
                else:
                    self.intake.take(agent, message, kind)
        self.state.notify()
        wake = self.state.wake
        if wake.is_set():
            wake.clear()
            try:
                with self.work.transaction():
                    self.scheduling.schedule()
            except Exception:
                wake.set()  # the scheduling loop tries again
                log.exception("scheduling after agent messages failed")

    def activate_experiment(self, exp_id: int) -> None:
        """Resumes a paused experiment, or revives one the infrastructure ended (refused otherwise)."""
        if self.lifecycle.revivable(exp_id):
            self.revival.revive(exp_id)
        else:
            self.lifecycle.activate_experiment(exp_id)

    def reconfigure(
        self, exp_id: int, config: ExperimentConfig, collect: bool = False, dry_run: bool = False
    ) -> list[str]:
        """`det e set max-slots|weight|priority|gc-policy`: the experiment runs on under `config` (already
        stored); with `collect`, its checkpoints are collected under the new save_* policy (the uuids)."""
        if not dry_run:
            self.lifecycle.reconfigure(exp_id, config)
        return self.checkpoints.apply_policy(exp_id, config, dry_run) if collect else []
