"""Runs across broken agent streams: adopting what an agent reports after it (re)connects, and
treating the runs it does not report, within a grace period, as lost."""

from __future__ import annotations

import time

import structlog

from pedl.v1 import agent_pb2
from pedl_scheduler.cluster import AgentHandle
from pedl_scheduler.experiments import machine
from pedl_scheduler.experiments.effects import Emit, EndStragglers
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.runtime import TrialRuntime

log = structlog.get_logger(component="experiments")


class RunAdoption:
    def __init__(self, state: SchedulerState, work: UnitOfWork, emit: Emit) -> None:
        self.state = state
        self.work = work
        self.emit = emit  # the runs it gives up on, ended by the trial runs room
        self.trials = state.trials

    def on_agent_registered(self, agent: AgentHandle, running: list[agent_pb2.RunningTrial]) -> None:
        """Adopts the runs the agent still has that are current here, and stops the rest.

        Trials this scheduler placed on the agent that it no longer reports get a short
        deadline: their exit may still be in the agent's backlog, which follows the register.
        A run that says it is busy holds workloads (or results) this scheduler may not know of:
        nothing more is sent to it until its next result.
        """
        with self.work.transaction():
            self._adopt_runs(agent, running)
        self.state.wake.set()

    def _adopt_runs(self, agent: AgentHandle, running: list[agent_pb2.RunningTrial]) -> None:
        reported = set()
        # Runs that hold their slots first: a waiting one takes its slots over from them (a handoff).
        for r in sorted(running, key=lambda r: r.waiting):
            trial = self.trials.get(r.trial_id)
            adoptable = (
                trial is not None
                and trial.run_id == r.run_id
                and not trial.killing
                and trial.agent_id in (None, agent.id)
                and (trial.running or trial.unconfirmed_until is not None)
            )
            if not adoptable:
                self.work.send(
                    agent,
                    agent_pb2.ConnectResponse(
                        kill_trial=agent_pb2.KillTrial(trial_id=r.trial_id, run_id=r.run_id)
                    ),
                )
                continue
            assert trial is not None
            reported.add(trial.id)
            trial.agent_id, trial.slot_ids = agent.id, tuple(r.slot_ids)
            self.state.running[trial.id] = trial
            trial.unconfirmed_until = None
            trial.outstanding, trial.busy_unknown = [], r.busy
            for slot_id in r.slot_ids:
                agent.hold(slot_id, trial.id)
            self.work.log_line(trial, f"trial {trial.id} run {trial.run_id} continues on agent {agent.id}")
            log.info("trial run adopted", trial_id=trial.id, run_id=trial.run_id, agent_id=agent.id)
            self.work.dispatch(trial)
        deadline = time.monotonic() + min(self.state.reconnect_grace, 5.0)
        for trial in self.trials.values():
            if trial.agent_id == agent.id and trial.id not in reported:
                trial.unconfirmed_until = deadline

    def on_agent_disconnected(self, agent_id: str) -> None:
        """The agent's trials may still be running: wait for it to reconnect, up to the grace period."""
        deadline = time.monotonic() + self.state.reconnect_grace
        for trial in self.trials.values():
            if agent_id in trial.gang_agents():
                trial.unconfirmed_until = deadline
        self.state.wake.set()

    def expire_unconfirmed(self, now: float) -> None:
        """Trials whose agent did not report them in time are treated as lost (and restarted)."""
        for trial in [t for t in self.trials.values() if t.exits_awaited and now >= t.exits_deadline]:
            self._emit(trial, EndStragglers(trial.id))
        for trial in [t for t in self.trials.values() if t.unconfirmed_until is not None]:
            if trial.unconfirmed_until is not None and now >= trial.unconfirmed_until:
                trial.unconfirmed_until = None
                if trial.exits_awaited:  # the work was done; a member's agent went away while exiting
                    self._emit(trial, EndStragglers(trial.id))
                elif trial.agent_id is not None:
                    self._emit(trial, machine.AgentLost(trial.id, trial.agent_id))

    def _emit(self, trial: TrialRuntime, step: EndStragglers | machine.AgentLost) -> None:
        self.emit(self.state.experiments[trial.experiment_id], [trial], [step])
