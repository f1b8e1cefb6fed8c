"""Slot assignment decisions, alone."""

from pedl_scheduler.scheduling import AgentCapacity, Assignment, QueuedTrial, assign


def test_queued_trials_fill_free_slots_in_order() -> None:
    queued = [QueuedTrial(1, 1, 1), QueuedTrial(2, 1, 1), QueuedTrial(3, 1, 1)]
    agents = [AgentCapacity("a", ("cpu0", "cpu1"))]
    assert assign(queued, agents) == [Assignment(1, "a", ("cpu0",)), Assignment(2, "a", ("cpu1",))]


def test_multi_slot_trials_get_all_their_slots_on_one_agent_or_wait() -> None:
    queued = [QueuedTrial(1, 1, 2), QueuedTrial(2, 1, 1)]
    agents = [AgentCapacity("a", ("cpu0",)), AgentCapacity("b", ("cpu0", "cpu1"))]
    assert assign(queued, agents) == [Assignment(1, "b", ("cpu0", "cpu1")), Assignment(2, "a", ("cpu0",))]
    assert assign([QueuedTrial(3, 1, 3)], agents) == []


def test_best_fit_keeps_large_blocks_free() -> None:
    agents = [AgentCapacity("big", ("0", "1", "2", "3")), AgentCapacity("small", ("0",))]
    assert assign([QueuedTrial(1, 1, 1)], agents) == [Assignment(1, "small", ("0",))]


def test_resource_pools_are_respected() -> None:
    agents = [AgentCapacity("a", ("0",), "gpu-pool")]
    assert assign([QueuedTrial(1, 1, 1, "default")], agents) == []
    assert assign([QueuedTrial(1, 1, 1, "gpu-pool")], agents) == [Assignment(1, "a", ("0",))]
