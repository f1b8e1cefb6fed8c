"""Placement honours the Python environments agents offer: a trial whose experiment names an
environment (e.g. `environment: tf215` for EstimatorTrial) only ever runs where it exists."""

from __future__ import annotations

from pedl_scheduler.scheduling import (
    Agent,
    Allocation,
    ClusterState,
    ExperimentResources,
    QueuedTrial,
    RunningTrial,
    decide,
)
from pedl_scheduler.scheduling.placement import PoolSlots


def agent(agent_id: str, slots: int, *environments: str, free: int | None = None) -> Agent:
    ids = tuple(f"{agent_id}/{i}" for i in range(slots))
    offered = frozenset(environments or ("default",))
    return Agent(agent_id, ids, ids[slots - (slots if free is None else free) :], "default", offered)


def queued(trial_id: int, exp: int, slots: int = 1, environment: str = "default") -> QueuedTrial:
    return QueuedTrial(trial_id, exp, slots, environment=environment)


def placed(state: ClusterState) -> dict[int, tuple[str, ...]]:
    return {t: tuple(a.agent_id for a in alloc) for t, alloc in decide(state).assignments.items()}


def test_a_trial_goes_only_to_an_agent_offering_its_environment() -> None:
    agents = [agent("a", 4), agent("b", 1, "default", "tf215")]
    state = ClusterState(agents, queued=[queued(2, 1), queued(1, 1, environment="tf215"), queued(3, 1)])
    assert placed(state) == {1: ("b",), 2: ("a",), 3: ("a",)}


def test_a_trial_waits_while_its_environments_agents_are_busy_even_with_others_idle() -> None:
    agents = [agent("a", 4), agent("b", 2, "default", "tf215", free=0)]
    state = ClusterState(agents, queued=[queued(1, 1, environment="tf215")])
    assert placed(state) == {}


def test_a_gang_spans_only_agents_offering_its_environment() -> None:
    agents = [agent("a", 2), agent("b", 2, "tf215"), agent("c", 2, "tf215")]
    state = ClusterState(agents, queued=[queued(1, 1, slots=4, environment="tf215")])
    assert placed(state) == {1: ("b", "c")}
    shape = PoolSlots(agents)
    assert shape.could_ever_fit(4, "tf215") and not shape.could_ever_fit(6, "tf215")
    assert not shape.could_ever_fit(1, "tf999")


def test_cpu_only_trials_spread_over_agents_offering_their_environment() -> None:
    agents = [agent("a", 2), agent("b", 2, "default", "tf215")]
    state = ClusterState(agents, queued=[queued(t, 1, slots=0, environment="tf215") for t in (1, 2, 3)])
    assert placed(state) == {1: ("b",), 2: ("b",)}  # b runs at most as many as it has slots


def test_preemption_frees_slots_only_where_the_environment_is() -> None:
    agents = [agent("a", 2, free=0), agent("b", 2, "tf215", free=0)]
    low = ExperimentResources(1, priority=50)
    high = ExperimentResources(2, priority=10)
    running = [
        RunningTrial(10, 1, (Allocation("a", ("a/0", "a/1")),), order=2),  # younger, but wrong place
        RunningTrial(11, 1, (Allocation("b", ("b/0", "b/1")),), order=1),
    ]
    state = ClusterState(
        agents, running, [queued(1, 2, slots=2, environment="tf215")], experiments={1: low, 2: high}
    )
    assert decide(state).preemptions == (11,)
