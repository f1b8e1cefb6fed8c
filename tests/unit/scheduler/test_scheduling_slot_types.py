"""A gang's slots are all of one type: an agent on a GPU machine started with `--slots N` offers GPU
and CPU slots, and a trial gets GPUs (preferred) or CPU slots, never some of each, on one agent or
over several; a trial no single type could ever hold is refused at create, saying so."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pedl.config import parse_experiment_config
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import UserError
from pedl_scheduler.experiments.lifecycle import check_fits
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
from pedl_scheduler.scheduling.slot_types import could_ever_fit


def machine(agent_id: str, gpus: int, cpus: int, busy: tuple[str, ...] = ()) -> Agent:
    """An agent as `pedl-agent --slots cpus` on a machine with `gpus` GPUs registers it."""
    ids = tuple(f"gpu{i}" for i in range(gpus)) + tuple(f"cpu{i}" for i in range(cpus))
    types = ("gpu",) * gpus + ("cpu",) * cpus
    return Agent(agent_id, ids, tuple(s for s in ids if s not in busy), slot_types=types)


def placed(state: ClusterState) -> dict[int, tuple[tuple[str, tuple[str, ...]], ...]]:
    return {
        t: tuple((a.agent_id, a.slot_ids) for a in alloc) for t, alloc in decide(state).assignments.items()
    }


def running(trial_id: int, agent_id: str, *slots: str, exp: int = 1, order: int = 0) -> RunningTrial:
    return RunningTrial(trial_id, exp, (Allocation(agent_id, slots),), order=order)


LOW, HIGH = ExperimentResources(1, priority=50), ExperimentResources(2, priority=10)


def test_a_two_slot_trial_gets_two_gpus_when_both_kinds_are_free() -> None:
    state = ClusterState([machine("a", 2, 2)], queued=[QueuedTrial(1, 1, 2)])
    assert placed(state) == {1: (("a", ("gpu0", "gpu1")),)}


def test_with_a_gpu_busy_a_two_slot_trial_takes_two_cpu_slots_never_one_of_each() -> None:
    state = ClusterState([machine("a", 2, 2, busy=("gpu0",))], queued=[QueuedTrial(1, 1, 2)])
    assert placed(state) == {1: (("a", ("cpu0", "cpu1")),)}


def test_a_two_slot_trial_waits_while_each_kind_has_one_free_slot() -> None:
    state = ClusterState([machine("a", 2, 2, busy=("gpu0", "cpu0"))], queued=[QueuedTrial(1, 1, 2)])
    assert placed(state) == {}


def test_single_slot_trials_fill_the_gpus_first_then_the_cpu_slots() -> None:
    state = ClusterState(
        [machine("a", 2, 2)], queued=[QueuedTrial(t, 1, 1, order=t) for t in (1, 2, 3, 4, 5)]
    )
    assert placed(state) == {
        1: (("a", ("gpu0",)),),
        2: (("a", ("gpu1",)),),
        3: (("a", ("cpu0",)),),
        4: (("a", ("cpu1",)),),
    }


def test_a_trial_larger_than_any_one_kind_could_never_fit_and_create_says_types_are_why() -> None:
    agents = [machine("a", 2, 2)]
    assert could_ever_fit(agents, 2) and not could_ever_fit(agents, 3) and not could_ever_fit(agents, 4)
    assert PoolSlots(agents).could_ever_fit(3)  # slots of all kinds together would have held it
    with pytest.raises(UserError) as error:
        check_fits(connected([("gpu", "gpu0"), ("gpu", "gpu1"), ("cpu", "cpu0"), ("cpu", "cpu1")]), config(3))
    message = str(error.value)
    assert "slots_per_trial is 3" in message and "slots of one type" in message, message
    assert "gpu slots: at most 2 on one agent, 2 in all; cpu slots: at most 2 on one agent" in message
    assert "all GPUs or all CPU slots, never both" in message
    check_fits(connected([("gpu", "gpu0"), ("gpu", "gpu1"), ("cpu", "cpu0"), ("cpu", "cpu1")]), config(2))


def test_a_trial_too_large_for_every_arrangement_keeps_the_old_reason() -> None:
    with pytest.raises(UserError, match=r"\(with 2 slots, 2 in all\) cannot hold it"):
        check_fits(connected([("gpu", "gpu0"), ("cpu", "cpu0")]), config(3))


def test_a_multi_agent_gang_takes_whole_agents_of_one_kind() -> None:
    agents = [machine("a", 2, 0), machine("b", 0, 2), machine("c", 2, 0)]
    assert placed(ClusterState(agents, queued=[QueuedTrial(1, 1, 4)])) == {
        1: (("a", ("gpu0", "gpu1")), ("c", ("gpu0", "gpu1")))
    }
    assert not could_ever_fit(agents, 6)  # 4 GPUs and 2 CPU slots: never 6 of one kind
    assert not could_ever_fit([machine("a", 2, 0), machine("b", 0, 2)], 4)


def test_a_gang_over_machines_offering_both_kinds_spans_their_gpus() -> None:
    """Before, it sat on one machine's 2 GPUs and 2 CPU slots; now it takes both machines' GPUs."""
    agents = [machine("a", 2, 2), machine("b", 2, 2)]
    assert placed(ClusterState(agents, queued=[QueuedTrial(1, 1, 4)])) == {
        1: (("a", ("gpu0", "gpu1")), ("b", ("gpu0", "gpu1")))
    }
    busy = [machine("a", 2, 2, busy=("gpu0",)), machine("b", 2, 2)]
    assert placed(ClusterState(busy, queued=[QueuedTrial(1, 1, 4)])) == {
        1: (("a", ("cpu0", "cpu1")), ("b", ("cpu0", "cpu1")))
    }


def test_preemption_frees_slots_of_one_kind_the_fewest_victims_first() -> None:
    agents = [machine("a", 2, 2, busy=("gpu0", "cpu0", "cpu1"))]
    low = [
        running(10, "a", "gpu0", order=1),
        running(11, "a", "cpu0", order=2),
        running(12, "a", "cpu1", order=3),
    ]
    state = ClusterState(agents, low, [QueuedTrial(1, 2, 2)], experiments={1: LOW, 2: HIGH})
    decision = decide(state)
    assert decision.preemptions == (10,) and not decision.assignments  # gpu1 is free: stop one, not two


def test_preemption_prefers_the_gpus_when_both_kinds_cost_the_same() -> None:
    agents = [machine("a", 2, 2, busy=("gpu0", "cpu0"))]
    low = [running(10, "a", "gpu0", order=1), running(11, "a", "cpu0", order=2)]  # 11 is younger
    state = ClusterState(agents, low, [QueuedTrial(1, 2, 2)], experiments={1: LOW, 2: HIGH})
    assert decide(state).preemptions == (10,)


def test_preemption_never_counts_a_free_slot_of_the_other_kind() -> None:
    """gpu0 held, cpu0 free: stopping the GPU trial alone frees no two slots of one kind."""
    agents = [machine("a", 1, 1, busy=("gpu0",))]
    state = ClusterState(
        agents, [running(10, "a", "gpu0")], [QueuedTrial(1, 2, 2)], experiments={1: LOW, 2: HIGH}
    )
    assert decide(state).preemptions == ()


def test_exiting_slots_of_two_kinds_are_not_handed_to_one_gang() -> None:
    """A run told to terminate holds gpu0 and cpu0 (placed before this rule): no handoff of both."""
    agent = replace(machine("a", 1, 1, busy=("gpu0", "cpu0")), handoff_slot_ids=("gpu0", "cpu0"))
    exiting = RunningTrial(10, 1, (Allocation("a", ("gpu0", "cpu0")),), preempting=True)
    assert placed(ClusterState([agent], [exiting], [QueuedTrial(1, 1, 2)])) == {}
    assert placed(ClusterState([agent], [exiting], [QueuedTrial(1, 1, 1)])) == {1: (("a", ("gpu0",)),)}


@pytest.mark.parametrize("kind", ["gpu", "cpu"])
def test_a_cluster_of_one_kind_schedules_exactly_as_without_types(kind: str) -> None:
    agents = [
        Agent(f"a{i}", tuple(f"s{j}" for j in range(n)), tuple(f"s{j}" for j in range(free)))
        for i, (n, free) in enumerate([(4, 4), (2, 1), (2, 2), (4, 0), (1, 1)])
    ]
    held = [
        running(10, "a1", "s1", order=1),
        running(11, "a3", "s0", "s1", order=2),
        running(12, "a3", "s2", "s3"),
    ]
    queued = [QueuedTrial(t, 2, n, order=t) for t, n in enumerate([1, 2, 4, 8, 2, 3, 1, 4], start=1)]
    untyped = ClusterState(agents, held, queued, experiments={1: LOW, 2: HIGH})
    typed = replace(untyped, agents=[replace(a, slot_types=(kind,) * len(a.slot_ids)) for a in agents])
    assert decide(typed) == decide(untyped)
    assert decide(untyped).preemptions  # the case exercises preemption too


def connected(slots: list[tuple[str, str]]) -> dict:
    cluster = Cluster()
    cluster.connect(
        agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id=i, type=t) for t, i in slots])
    )
    return cluster.agents


def config(slots: int) -> object:
    return parse_experiment_config(
        "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n"
        f"resources: {{slots_per_trial: {slots}}}\n"
    )
