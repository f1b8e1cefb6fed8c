"""One scheduling pass: what the pure policy (`pedl_scheduler.scheduling`) is shown of the cluster
and the queue, and acting on its decision (starts, preemptions, idle slots given back)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from pedl_scheduler import scheduling
from pedl_scheduler.cluster import AgentHandle
from pedl_scheduler.experiments import machine
from pedl_scheduler.experiments.effects import Emit, StartRun
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.runtime import TrialRuntime
from pedl_scheduler.scheduling.labels import offered_keys, placement_key


class SchedulingPass:
    def __init__(self, state: SchedulerState, work: UnitOfWork, emit: Emit) -> None:
        self.state = state
        self.work = work
        self.emit = emit  # the starts and stops it decides, carried out by the trial runs room
        self.policy = scheduling.SchedulingPolicy()

    def _stop(self, trial: TrialRuntime) -> None:
        self.emit(self.state.experiments[trial.experiment_id], [trial], [machine.RequestStop(trial.id)])

    def schedule(self) -> None:
        """One tick: start queued trials on free slots, and ask preempted ones to stop."""
        state = self.cluster_state()
        decision = scheduling.decide(state, self.policy)
        for trial_id in decision.preemptions:
            trial = self.state.trials[trial_id]
            if not trial.sequencer.stop_requested:
                self.work.log_line(
                    trial,
                    f"trial {trial.id} is preempted by higher-priority work: it checkpoints "
                    "and will resume when slots free up",
                )
                self._stop(trial)
        waiting = {t.trial_id for t in state.queued} - set(decision.assignments)
        self.state.trials_waiting = bool(waiting)
        if waiting:
            self._yield_idle_slots()
        for trial_id, allocations in decision.assignments.items():
            gang = [(self.state.cluster.agents[a.agent_id], a.slot_ids) for a in allocations]
            trial = self.state.trials[trial_id]
            self.emit(self.state.experiments[trial.experiment_id], [trial], [StartRun(trial_id, gang)])

    def drain(self, agent: AgentHandle, reason: str) -> None:
        """An agent leaving on notice (AgentDraining): nothing new goes there, and each of its trials
        checkpoints at its next step boundary and stops, to resume elsewhere without spending a
        restart (as a preempted trial does). Idempotent: the agent repeats it while trials remain."""
        agent.disabled = True  # in memory only: the agent's id is not reused once it leaves
        for trial in list(self.state.running.values()):
            if agent.id not in trial.gang_agents() or trial.sequencer.stop_requested:
                continue
            if trial.sequencer.terminated:
                continue  # it exits anyway
            self.work.log_line(
                trial, f"{reason}: trial {trial.id} checkpoints and stops, to resume on another agent"
            )
            self._stop(trial)

    def cluster_state(self) -> scheduling.ClusterState:
        running, queued = [], []
        exiting: set[int] = set()  # told to terminate: their slots may be handed off
        agents = self.state.cluster.agents
        # One pass can place at most this many trials (free and handoff slots, CPU-only trials) and
        # serves an experiment's trials oldest first, so only its oldest queued ones need be shown
        # to the policy: a search that queues thousands costs a pass no more than one that queues few.
        window = 2 * sum(max(len(a.slots), 1) for a in agents.values()) + 1
        for t in self.state.running.values():
            if t.sequencer.terminated:
                exiting.add(t.id)
            held = [(t.agent_id or "", t.slot_ids), *t.peers]
            # Slots already handed off count as the next trial's, not this one's.
            allocations = tuple(
                scheduling.Allocation(a, slots_held(_next_of(agents.get(a)), t.id, slots))
                for a, slots in held
            )
            if any(slots for _, slots in held) and not any(a.slot_ids for a in allocations):
                continue
            running.append(
                scheduling.RunningTrial(
                    t.id,
                    t.experiment_id,
                    allocations,
                    preempting=t.sequencer.stop_requested or t.sequencer.terminated,
                    order=t.started_order,
                )
            )
        experiments = self.state.experiments
        now = time.monotonic()  # restarted trials wait out their backoff (TrialRuntime.not_before)
        for exp in experiments.values():
            if exp.state != "ACTIVE":
                continue
            shown = 0
            for t in exp.live.values():  # oldest first (created, recovered in id order)
                if shown >= window:
                    break
                if (
                    not t.running
                    and t.state == "ACTIVE"
                    and not t.killing
                    and t.unconfirmed_until is None
                    and t.waiting_on is None
                    and (t.not_before is None or t.not_before <= now)
                    and self.has_work(t)
                ):
                    shown += 1
                    queued.append(
                        scheduling.QueuedTrial(
                            t.id,
                            t.experiment_id,
                            exp.config.slots_per_trial,
                            exp.config.resources.resource_pool or scheduling.DEFAULT_POOL,
                            order=t.id,
                            environment=placement_key(
                                exp.config.environment_name or scheduling.DEFAULT_ENVIRONMENT,
                                exp.config.resources.agent_label,
                            ),
                        )
                    )
        resources = {
            e.id: scheduling.ExperimentResources(
                e.id,
                weight=e.config.resources.weight,
                max_slots=e.config.resources.max_slots,
                priority=e.config.resources.priority or scheduling.DEFAULT_PRIORITY,
            )
            for e in experiments.values()
        }
        offered = [
            scheduling_agent(a, a.free_slots(), a.handoff_slots(exiting) if exiting else ())
            for a in agents.values()
        ]
        return scheduling.ClusterState(offered, running, queued, resources)

    def _yield_idle_slots(self) -> None:
        """Trials idle until the searcher hears from others (a PBT round) give their slots to queued ones.

        Without this, a population larger than the cluster would wait forever on itself.
        """
        for trial in list(self.state.running.values()):
            if (
                trial.running
                and not trial.in_flight
                and not trial.sequencer.stop_requested
                and not trial.sequencer.awaits_epoch_length  # its harness is measuring its data
                and trial.sequencer.next_workload() is None
            ):
                self.work.log_line(
                    trial, f"trial {trial.id} waits for the searcher; it releases its slots meanwhile"
                )
                self._stop(trial)

    @staticmethod
    def has_work(trial: TrialRuntime) -> bool:
        """Whether a (re)started run of the trial would have a workload to do now.

        Cached until the trial's state changes (`UnitOfWork.save_trial`, an exit): every scheduling
        pass asks it of every queued trial, and a search may queue thousands.
        """
        if trial.has_work is None:
            probe = trial.sequencer.clone()
            probe.restart_from(trial.latest_checkpoint_batches, trial.latest_checkpoint_step)
            trial.has_work = probe.next_workload() is not None or probe.awaits_epoch_length
        return trial.has_work


def scheduling_agent(
    agent: AgentHandle, free_slots: tuple[str, ...], handoff_slots: tuple[str, ...] = ()
) -> scheduling.Agent:
    """What the pure scheduling policy sees of a connected agent."""
    return scheduling.Agent(
        agent.id,
        tuple(s.id for s in agent.slots),
        free_slots,
        agent.resource_pool,
        offered_keys(agent.environments, agent.label),
        handoff_slots,
        tuple(s.type for s in agent.slots),
    )


def slots_held(next_by_slot: Mapping[str, int], trial_id: int, slots: tuple[str, ...]) -> tuple[str, ...]:
    """The trial's `slots` that count as its own: all but those handed off to another trial.

    A trial placed on handed-off slots holds them from its start (they are `next` to it, not
    to another): counting them as nobody's would show its experiment below its weighted share,
    and hand it, or its peer, slots the weights do not owe it.
    """
    return tuple(s for s in slots if next_by_slot.get(s, trial_id) == trial_id)


def _next_of(agent: AgentHandle | None) -> Mapping[str, int]:
    return agent.next if agent is not None else {}
