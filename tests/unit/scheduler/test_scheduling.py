"""Slot assignment decisions over free slots, alone (`decide` with no preemption)."""

from __future__ import annotations

from pedl_scheduler.scheduling import Agent, Allocation, ClusterState, QueuedTrial, SchedulingPolicy, decide


def free_agent(agent_id: str, slots: tuple[str, ...], pool: str = "default") -> Agent:
    return Agent(agent_id, slots, slots, pool)


def placed(queued: list[QueuedTrial], agents: list[Agent]) -> dict[int, tuple[Allocation, ...]]:
    decision = decide(ClusterState(agents=agents, queued=queued), SchedulingPolicy(priority_preemption=False))
    return {trial_id: tuple(allocation) for trial_id, allocation in decision.assignments.items()}


def test_queued_trials_fill_free_slots_in_order() -> None:
    queued = [QueuedTrial(1, 1, 1), QueuedTrial(2, 1, 1), QueuedTrial(3, 1, 1)]
    agents = [free_agent("a", ("cpu0", "cpu1"))]
    assert placed(queued, agents) == {1: (Allocation("a", ("cpu0",)),), 2: (Allocation("a", ("cpu1",)),)}


def test_multi_slot_trials_get_all_their_slots_on_one_agent_first() -> None:
    queued = [QueuedTrial(1, 1, 2), QueuedTrial(2, 1, 1)]
    agents = [free_agent("a", ("cpu0",)), free_agent("b", ("cpu0", "cpu1"))]
    assert placed(queued, agents) == {
        1: (Allocation("b", ("cpu0", "cpu1")),),
        2: (Allocation("a", ("cpu0",)),),
    }


def test_best_fit_keeps_large_blocks_free() -> None:
    agents = [free_agent("big", ("0", "1", "2", "3")), free_agent("small", ("0",))]
    assert placed([QueuedTrial(1, 1, 1)], agents) == {1: (Allocation("small", ("0",)),)}


def test_resource_pools_are_respected() -> None:
    agents = [free_agent("a", ("0",), "gpu-pool")]
    assert placed([QueuedTrial(1, 1, 1, "default")], agents) == {}
    assert placed([QueuedTrial(1, 1, 1, "gpu-pool")], agents) == {1: (Allocation("a", ("0",)),)}
