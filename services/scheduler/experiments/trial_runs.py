"""A trial's runs: starting one on slots (alone or as a gang), feeding it workloads, stopping or
killing it, and what its exit means (stopped to resume later, completed, restarted, or failed)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import structlog

from pedl._metrics import to_struct
from pedl._timeutil import utc_now
from pedl.config import carried
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import AgentHandle
from pedl_scheduler.experiments import machine, machine_views, run_exits, run_start
from pedl_scheduler.experiments.checkpoint_lifecycle import usable_checkpoint
from pedl_scheduler.experiments.effects import Emit
from pedl_scheduler.experiments.failures import RunFailure, run_failure
from pedl_scheduler.experiments.restart_policy import USER
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime
from pedl_scheduler.storage.ops import timelines as timeline_ops
from pedl_scheduler.storage.ops import trials as trial_ops

log = structlog.get_logger(component="experiments")

# Rendezvous ports of gangs over several agents: this base plus the trial id modulo 1000.
RENDEZVOUS_BASE_PORT = 29500


class TrialRuns:
    def __init__(self, state: SchedulerState, work: UnitOfWork, emit: Emit) -> None:
        self.state = state
        self.work = work
        self.emit = emit  # what the machine decided about a run's end, carried out by the dispatcher
        self.db = state.db
        self.cluster = state.cluster
        self.trials = state.trials
        self.running = state.running
        self._starts = 0

    # ---- starting and feeding a run -------------------------------------------------------

    def start(self, trial: TrialRuntime, gang: list[tuple[AgentHandle, tuple[str, ...]]]) -> None:
        """Starts a run on one agent, or as a gang over several (the first holds the chief, rank 0)."""
        with self.work.transaction():
            self._start_run(trial, gang)

    def _start_run(self, trial: TrialRuntime, gang: list[tuple[AgentHandle, tuple[str, ...]]]) -> None:
        exp = self.state.experiments[trial.experiment_id]
        (agent, slot_ids), others = gang[0], gang[1:]
        trial.run_id += 1
        self._starts += 1
        trial.started_order = self._starts
        trial.assigned_at = time.time()
        trial.agent_id = agent.id
        self.running[trial.id] = trial
        trial.slot_ids = slot_ids
        trial.peers = tuple((a.id, slots) for a, slots in others)
        trial.outstanding, trial.busy_unknown = [], False
        usable_checkpoint(self.state, self.work, trial)
        trial.sequencer.restart_from(trial.latest_checkpoint_batches, trial.latest_checkpoint_step)
        after: dict[str, list[int]] = {}  # per agent: trials whose slots this run takes over as they exit
        for member, slots in gang:
            for slot_id in slots:
                holder = member.hold(slot_id, trial.id)
                if holder is not None and holder not in after.setdefault(member.id, []):
                    after[member.id].append(holder)
        self._record_run_started(trial)
        env = exp.config.environment_name or ""
        world_size = sum(len(slots) for _, slots in gang)
        # The chief's rank 0 listens here for the other ranks (only needed across agents).
        rendezvous = (
            f"{agent.address or '127.0.0.1'}:{RENDEZVOUS_BASE_PORT + trial.id % 1000}" if others else ""
        )
        if exp.start_config is None:
            exp.start_config = carried.to_json(exp.config)
        model_name, model_sha256 = run_start.model_definition(self.state, exp)
        agent_user = run_start.agent_user(self.state, exp)
        rank = 0
        for member, slots in gang:
            self.work.send(
                member,
                agent_pb2.ConnectResponse(
                    start_trial=agent_pb2.StartTrial(
                        trial_id=trial.id,
                        run_id=trial.run_id,
                        experiment_id=exp.id,
                        config_json=exp.start_config,
                        hparams=to_struct(trial.hparams),
                        latest_checkpoint_uuid=trial.latest_checkpoint_uuid,
                        latest_checkpoint_batches=trial.latest_checkpoint_batches,
                        # A trial with a checkpoint of its own resumes from it, not from the source.
                        warm_start_checkpoint_uuid=""
                        if trial.latest_checkpoint_uuid
                        else exp.warm_start_uuid,
                        slot_ids=list(slots),
                        trial_seed=trial.seed,
                        checkpoint_store_address=self.state.checkpoint_store_address,
                        model_definition_name=model_name,
                        model_definition_sha256=model_sha256,
                        rank=rank,
                        world_size=world_size,
                        rendezvous_address=rendezvous,
                        environment="" if env == "default" else env,
                        checkpoint_token=run_start.checkpoint_token(self.state, exp, trial),
                        after=[
                            agent_pb2.RunRef(trial_id=h, run_id=self.trials[h].run_id)
                            for h in after.get(member.id, ())
                        ],
                        agent_user=agent_user,
                    )
                ),
            )
            rank += len(slots)
        placement = "; ".join(f"agent {m.id} (slots {', '.join(slots)})" for m, slots in gang)
        handoff = sorted({h for holders in after.values() for h in holders})
        if handoff:
            placement += f", taking them over from trial {', '.join(map(str, handoff))} as it exits"
        self.work.log_line(trial, f"trial {trial.id} run {trial.run_id} started on {placement}")
        log.info("trial started", trial_id=trial.id, run_id=trial.run_id, agent_id=agent.id, gang=len(gang))
        self.work.dispatch(trial)

    def _record_run_started(self, trial: TrialRuntime) -> None:
        agents = (trial.agent_id or "", *(agent_id for agent_id, _ in trial.peers))
        trial_ops.start_run(
            self.db, trial.id, trial.run_id, json.dumps(trial.sequencer.to_dict()), utc_now(), agents
        )

    def trial_agent(self, trial_id: int) -> str:
        trial = self.trials.get(trial_id)
        return trial.agent_id or "" if trial else ""

    # ---- stopping a run ---------------------------------------------------------------------

    def request_stop(self, trial: TrialRuntime) -> None:
        """Checkpoint at the next step boundary, then exit; the trial resumes later (pause, preemption)."""
        with self.work.transaction():
            trial.sequencer.request_stop()
            self.work.save_trial(trial)
            self.work.dispatch(trial)

    def kill_run(self, trial: TrialRuntime, skip: str | None = None) -> None:
        """Asks every agent of the trial's current run (but `skip`) to kill it."""
        for agent_id in trial.gang_agents():
            agent = self.cluster.agents.get(agent_id)
            if agent is not None and agent_id != skip:
                self.work.send(
                    agent,
                    agent_pb2.ConnectResponse(
                        kill_trial=agent_pb2.KillTrial(trial_id=trial.id, run_id=trial.run_id)
                    ),
                )

    # ---- a run's end ------------------------------------------------------------------------

    def on_trial_exited(self, agent: AgentHandle, message: agent_pb2.TrialExited) -> None:
        trial = self.state.current_run(agent, message.trial_id, message.run_id)
        if trial is None:
            return
        if agent.id == trial.agent_id:
            trial.exit_timeline = list(message.timeline)
        if run_exits.gang_still_exiting(trial, agent.id, message.exit_code, message.killed, time.monotonic()):
            log.info("gang member exited; waiting for the rest", trial_id=trial.id, agent_id=agent.id)
            return
        self._record_timeline(trial, trial.exit_timeline)
        self.on_exit(trial, message.exit_code, message.error, message.killed, run_failure(message))

    def end_straggling_gang(self, trial: TrialRuntime) -> None:
        """Members not heard from within the grace after the others exited (or whose agent was lost
        meanwhile) are killed; the work was done, so the trial completes."""
        waiting = sorted(trial.exits_awaited or ())
        log.warning("gang members did not report their exit; killing them", trial_id=trial.id, agents=waiting)
        kill = agent_pb2.ConnectResponse(
            kill_trial=agent_pb2.KillTrial(trial_id=trial.id, run_id=trial.run_id)
        )
        for agent_id in waiting:
            agent = self.cluster.agents.get(agent_id)
            if agent is not None:
                self.work.send(agent, kill)
        self._record_timeline(trial, trial.exit_timeline)
        self.on_exit(trial, 0, "", False)

    def _record_lost_run(self, trial: TrialRuntime) -> None:
        """The timeline of a run whose agent was lost: what the scheduler saw (the agent's and the
        harness's phases went with the agent), from its slots assigned to the loss."""
        self._record_timeline(trial, [run_exits.agent_lost_phase(trial, time.time())])

    def _record_timeline(self, trial: TrialRuntime, phases: Sequence[common_pb2.TimelinePhase]) -> None:
        timeline_ops.add_run(
            self.db, trial.id, trial.run_id, run_exits.timeline_rows(trial, phases, time.time())
        )

    def on_exit(
        self, trial: TrialRuntime, exit_code: int, error: str, killed: bool, failure: RunFailure | None = None
    ) -> None:
        self.run_ended(trial, machine.RunExited(trial.id, exit_code, error, killed, failure))

    def on_agent_lost(self, trial: TrialRuntime, agent_id: str) -> None:
        """The run's agent did not come back in time: the run is recorded as lost, the trial restarts."""
        self._record_lost_run(trial)
        self.run_ended(trial, machine.AgentLost(trial.id, agent_id))

    def run_ended(self, trial: TrialRuntime, event: machine.Event) -> None:
        """The run is over (`RunExited`, `AgentLost`, `ResultsRefused`): its slots are freed and the
        machine's decision about the trial is carried out (the kill first, while its agents are known)."""
        exp = self.state.experiments[trial.experiment_id]
        state, effects = machine.handle(machine_views.experiment_view(exp, [trial]), event)
        if any(isinstance(e, machine.KillRun) for e in effects):
            self.kill_run(trial)  # while the run's agents are still known
        self.cluster.release(trial.id)
        trial.agent_id, trial.slot_ids, trial.peers = None, (), ()
        trial.exits_awaited, trial.exit_timeline = None, []
        self.running.pop(trial.id, None)
        trial.outstanding, trial.busy_unknown = [], False
        trial.unconfirmed_until = None
        trial.has_work = None
        machine_views.absorb(exp, {trial.id: trial}, state)
        with self.work.transaction():
            self.emit(exp, [trial], [e for e in effects if not isinstance(e, machine.KillRun)])

    def restart(self, trial: TrialRuntime, exp: ExperimentRuntime, restart: machine.Restart) -> None:
        """Queues the trial again after its backoff; the next run resumes from its latest checkpoint."""
        delay = self.state.restart_backoff.delay(restart.attempt)
        trial.not_before = time.monotonic() + delay
        origin = run_exits.restart_origin(trial)
        if restart.counted:
            trial_ops.set_restarts(self.db, trial.id, trial.restarts)
            self.work.log_line(
                trial,
                f"restarting trial {trial.id} from {origin} in {delay:.1f} s "
                f"(restart {trial.restarts} of max_restarts {exp.config.max_restarts})",
            )
            log.info("trial restarting", trial_id=trial.id, restarts=trial.restarts, delay_s=round(delay, 2))
            return
        trial.waiting_reason = (
            f"waiting for the infrastructure: {restart.why}; restarting in {delay:.0f} s "
            f"(failure {restart.attempt} in a row, not counted against max_restarts)"
        )
        self.work.log_line(
            trial,
            f"trial {trial.id}'s run failed because {restart.why}; restarting from "
            f"{origin} in {delay:.1f} s, which does not count against max_restarts",
        )
        log.warning(
            "trial waits for the infrastructure", trial_id=trial.id, why=restart.why, failures=restart.attempt
        )

    def set_state(self, trial: TrialRuntime, state: str) -> None:
        """ACTIVE or PAUSED (the experiment's pause or activate)."""
        trial.state = state
        trial_ops.set_trial_state(self.db, trial.id, state)

    def end_trial(self, trial: TrialRuntime, state: str, error: str, cause: str = "") -> None:
        """The trial ends for good: its row says how, the indexes forget it (the dispatcher then moves
        its waiting children on). `cause`: why a COMPLETED trial ended early (early_exit.NAMES)."""
        trial.state = state
        self.work.save_trial(trial)
        self._record_trial_end(trial.id, state, error, cause)
        self.trials.pop(trial.id, None)
        self.running.pop(trial.id, None)
        self.state.wait_for(trial, None)
        exp = self.state.experiments.get(trial.experiment_id)
        if exp is not None and exp.live.get(trial.request_id) is trial:
            del exp.live[trial.request_id]
        if exp is not None:
            exp.checkpointed.pop(trial.id, None)

    def _record_trial_end(self, trial_id: int, state: str, error: str, cause: str = "") -> None:
        # The infrastructure never ends a trial (it waits for it instead): an ERROR is the trial's own.
        trial_ops.end_trial(self.db, trial_id, state, error, utc_now(), USER if state == "ERROR" else cause)
