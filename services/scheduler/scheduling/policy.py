"""One scheduling tick as a pure function: `decide(state) -> Decision`.

Order of service: higher priority first (a smaller number, as in Determined); among experiments
of one priority, the one using the fewest slots per unit of `weight` next (slots of runs
already stopping count as gone), so slots divide in proportion to weight and none idle while
any trial could use them; within an experiment, the oldest trial first. A trial that does not
fit is passed over this tick (no reservation outlives the tick, so two gangs can never deadlock
each other) unless it may preempt: then lower-priority trials are stopped for it and it starts
once they have checkpointed and let go of their slots. Before preempting, a trial that fits on
one agent may take over slots whose runs were told to terminate (a handoff): the agent starts
it the moment they exit, without a round trip through the scheduler. Every step looks at one
slot type at a time, GPUs first (`slot_types.py`), so no gang mixes GPU and CPU slots.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import replace

from pedl_scheduler.scheduling.placement import PoolSlots
from pedl_scheduler.scheduling.preemption import MayStop, Plan, Preemptor
from pedl_scheduler.scheduling.share import weighted_shares
from pedl_scheduler.scheduling.slot_types import typed_pools, types_of
from pedl_scheduler.scheduling.state import (
    Agent,
    Allocation,
    ClusterState,
    Decision,
    ExperimentResources,
    QueuedTrial,
    RunningTrial,
    SchedulingPolicy,
)
from pedl_scheduler.scheduling.zero_slot import place_zero_slot_trials

_EPSILON = 1e-9


def decide(state: ClusterState, policy: SchedulingPolicy | None = None) -> Decision:
    """What to start and what to preempt this tick; the same state always gives the same decision."""
    return _Tick(state, policy or SchedulingPolicy()).run()


class _Tick:
    def __init__(self, state: ClusterState, policy: SchedulingPolicy) -> None:
        self.state, self.policy = state, policy
        by_pool: dict[str, list[Agent]] = {}
        for agent in sorted(state.agents, key=lambda a: a.agent_id):
            by_pool.setdefault(agent.resource_pool, []).append(agent)
        # Each pool's slots by type, preferred type first.
        self.pools = {name: typed_pools(agents) for name, agents in by_pool.items()}
        # Slots whose runs are exiting, per pool, and who holds each: handed to a trial only when no
        # free slot fits it, and before anything is preempted for it.
        self.handoffs = {
            name: typed_pools([replace(a, free_slot_ids=a.handoff_slot_ids) for a in agents])
            for name, agents in by_pool.items()
            if any(a.handoff_slot_ids for a in agents)
        }
        self.holders = {
            (a.agent_id, slot): t.trial_id
            for t in (state.running if self.handoffs else ())
            for a in t.allocations
            for slot in a.slot_ids
        }
        exp_ids = {t.experiment_id for t in state.running} | {t.experiment_id for t in state.queued}
        self.res: dict[int, ExperimentResources] = {e: state.resources(e) for e in sorted(exp_ids)}
        # Slots held, started or planned this tick, not counting slots already leaving: those of runs
        # told to stop, and those offered for handoff. They are free a moment later, and the order of
        # service asks who holds the fewest once they are gone: counting them against the leaving
        # run's experiment ties weight 3 on 3 slots with weight 1 on 1, and the tie drifts shares to
        # 2:2. `max_slots` still counts them (`leaving`): until they exit, the experiment holds them.
        exiting = {(a.agent_id, s) for a in state.agents for s in a.handoff_slot_ids}
        self.used = {e: 0 for e in self.res}
        self.leaving = {e: 0 for e in self.res}
        for t in state.running:
            if t.preempting:
                leaving = t.slots
            else:
                leaving = sum((a.agent_id, s) in exiting for a in t.allocations for s in a.slot_ids)
            leaving = min(leaving, t.slots)
            self.used[t.experiment_id] += t.slots - leaving
            self.leaving[t.experiment_id] += leaving
        self.released = {e: 0 for e in self.res}  # slots of this tick's victims
        slot_types = {a.agent_id: types_of(a) for a in state.agents}
        self.preemptor = Preemptor(
            list(state.running), {e: r.priority for e, r in self.res.items()}, slot_types
        )
        self.assignments: dict[int, tuple[Allocation, ...]] = {}
        self.preemptions: list[int] = []
        self.shares = self._fair_shares() if policy.fair_share_preemption else {}
        # sizes known not to fit (free slots only shrink within a tick), per pool
        self.no_fit: dict[str, tuple[float, set[int]]] = {}
        self.no_plan: dict[object, tuple[float, set[int]]] = {}
        self.no_handoff: dict[str, tuple[float, set[int]]] = {}

    def run(self) -> Decision:
        zero = [t for t in self.state.queued if t.slots <= 0]
        cap = self.policy.zero_slot_trials_per_agent
        self.assignments.update(
            place_zero_slot_trials(zero, self.state.agents, self.state.running, self._priority_of, cap)
        )
        queues: dict[int, list[QueuedTrial]] = {}
        for t in sorted((t for t in self.state.queued if t.slots > 0), key=lambda t: (t.order, t.trial_id)):
            queues.setdefault(t.experiment_id, []).append(t)
        heap = [(self.res[e].priority, self._ratio(e), e) for e in sorted(queues)]
        heapq.heapify(heap)
        cursor = dict.fromkeys(queues, 0)
        while heap:
            priority, _, e = heapq.heappop(heap)
            self._try(queues[e][cursor[e]])
            cursor[e] += 1
            if cursor[e] < len(queues[e]):
                heapq.heappush(heap, (priority, self._ratio(e), e))
        return Decision(self.assignments, tuple(self.preemptions))

    def _priority_of(self, experiment_id: int) -> int:
        return self.res[experiment_id].priority

    def _ratio(self, e: int) -> float:
        return self.used[e] / self.res[e].weight

    def _try(self, trial: QueuedTrial) -> None:
        pools = self.pools.get(trial.resource_pool)
        e, n = trial.experiment_id, trial.slots
        cap = self.res[e].max_slots
        if pools is None or (cap is not None and self.used[e] + self.leaving[e] + n > cap):
            return
        for pool in pools:
            largest = pool.largest_offering(trial.environment)
            where = (trial.resource_pool, trial.environment, pool.slot_type)
            if _known_to_fail(self.no_fit, where, n, largest):
                continue
            allocation = pool.fit(n, trial.environment)
            if allocation is not None:
                for a in allocation:
                    pool.take(a.agent_id, a.slot_ids)
                self.assignments[trial.trial_id] = allocation
                self.used[e] += n
                return
            _remember_failure(self.no_fit, where, n, largest)
        if not self._try_handoff(trial):
            self._try_preempting(trial, pools)

    def _try_handoff(self, trial: QueuedTrial) -> bool:
        """Places a trial that fits on one agent on slots (of one type) whose runs are exiting."""
        for handoff in self.handoffs.get(trial.resource_pool, ()):
            n, largest = trial.slots, handoff.largest_offering(trial.environment)
            where = (trial.resource_pool, trial.environment, handoff.slot_type)
            if n > largest or _known_to_fail(self.no_handoff, where, n, largest):
                continue
            allocation = handoff.fit(n, trial.environment)
            if allocation is None:
                _remember_failure(self.no_handoff, where, n, largest)
                continue
            for a in allocation:
                handoff.take(a.agent_id, a.slot_ids)
                for slot in a.slot_ids:
                    self.preemptor.claim(self.holders[(a.agent_id, slot)])
            self.assignments[trial.trial_id] = allocation
            self.used[trial.experiment_id] += n
            return True
        return False

    def _try_preempting(self, trial: QueuedTrial, pools: list[PoolSlots]) -> None:
        """The cheapest plan over slots of one type, the preferred type first on a tie."""
        e, n = trial.experiment_id, trial.slots
        priority = self.res[e].priority
        budget = self._fair_share_budget(trial)
        if not self.policy.priority_preemption and budget is None:
            return
        may_stop = self._may_stop(priority, e, budget)
        cache_as = priority if budget is None else None  # per-agent plans depend on may_stop alone
        best: tuple[Plan, PoolSlots] | None = None
        for pool in pools:
            where = (trial.resource_pool, trial.environment, pool.slot_type)
            key: object = where if budget is None else (*where, e)
            largest = pool.largest_offering(trial.environment)
            if _known_to_fail(self.no_plan, key, n, largest):
                continue
            plan = self.preemptor.plan(pool, n, may_stop, budget or {}, cache_as, trial.environment)
            if plan is None:
                _remember_failure(self.no_plan, key, n, largest)
            elif best is None or plan.cost < best[0].cost:
                best = (plan, pool)
        if best is None:
            return
        plan, pool = best
        self.preemptor.commit(pool, plan)
        for trial_id in plan.reclaimed:
            for a in self.preemptor.trials[trial_id].allocations:
                for handoff in self.handoffs.get(trial.resource_pool, ()):
                    if a.agent_id in handoff.free:
                        handoff.take(a.agent_id, a.slot_ids)  # the plan counts on them
        for trial_id in plan.victims:
            victim = self.preemptor.trials[trial_id]
            self.released[victim.experiment_id] += victim.slots
        self.preemptions.extend(plan.victims)
        self.used[e] += n

    def _may_stop(self, priority: int, e: int, budget: dict[int, float] | None) -> MayStop:
        by_priority = self.policy.priority_preemption

        def may_stop(t: RunningTrial) -> bool:
            theirs = self.res[t.experiment_id].priority
            if theirs > priority:
                return by_priority
            return budget is not None and theirs == priority and t.experiment_id in budget

        return may_stop

    def _fair_share_budget(self, trial: QueuedTrial) -> dict[int, float] | None:
        """Slots each same-priority experiment may lose to this trial, if its experiment is owed them."""
        if not self.policy.fair_share_preemption:
            return None
        e, pool = trial.experiment_id, trial.resource_pool
        shares = self.shares.get(pool, {})
        if e not in shares or self.used[e] + trial.slots > shares[e] + _EPSILON:
            return None
        priority = self.res[e].priority
        return {
            f: self.used[f] - self.released[f] - share
            for f, share in shares.items()
            if f != e and self.res[f].priority == priority
        }

    def _fair_shares(self) -> dict[str, dict[int, float]]:
        """Each experiment's weighted share of its pool, after higher priorities take what they want."""
        agent_pool = {a.agent_id: a.resource_pool for a in self.state.agents}
        demand: dict[str, dict[int, int]] = {}
        for t in self.state.running:
            if t.allocations and t.slots:
                pool = agent_pool.get(t.allocations[0].agent_id)
                if pool is not None:
                    per_pool = demand.setdefault(pool, {})
                    per_pool[t.experiment_id] = per_pool.get(t.experiment_id, 0) + t.slots
        for q in self.state.queued:
            if q.slots > 0 and q.resource_pool in self.pools:
                per_pool = demand.setdefault(q.resource_pool, {})
                per_pool[q.experiment_id] = per_pool.get(q.experiment_id, 0) + q.slots
        shares: dict[str, dict[int, float]] = {}
        for pool, wants in sorted(demand.items()):
            left: float = sum(typed.total for typed in self.pools[pool])
            shares[pool] = {}
            for priority in sorted({self.res[e].priority for e in wants}):
                claims = {
                    e: (self.res[e].weight, float(min(n, self.res[e].max_slots or n)))
                    for e, n in wants.items()
                    if self.res[e].priority == priority
                }
                shares[pool].update(weighted_shares(left, claims))
                left = max(left - sum(c[1] for c in claims.values()), 0.0)
        return shares


def _known_to_fail(cache: dict, key: object, slots: int, largest: int) -> bool:
    """A gang no smaller than one that failed on one agent fails too; multi-agent sizes are exact.

    `largest`: the most slots one eligible agent has (larger gangs span agents)."""
    smallest, sizes = cache.get(key, (math.inf, set()))
    return slots >= smallest if slots <= largest else slots in sizes


def _remember_failure(cache: dict, key: object, slots: int, largest: int) -> None:
    smallest, sizes = cache.get(key, (math.inf, set()))
    if slots <= largest:
        cache[key] = (min(smallest, slots), sizes)
    else:
        cache[key] = (smallest, sizes | {slots})
