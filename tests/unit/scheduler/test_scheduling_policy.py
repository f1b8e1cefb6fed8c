"""The scheduling policy: what starts and what is preempted for a given cluster state."""

from __future__ import annotations

import random

import pytest

from pedl_scheduler.scheduling import (
    Agent,
    Allocation,
    ClusterState,
    ExperimentResources,
    QueuedTrial,
    RunningTrial,
    SchedulingPolicy,
    decide,
)


def agent(agent_id: str, slots: int, free: int | None = None, pool: str = "default") -> Agent:
    ids = tuple(f"{agent_id}/{i}" for i in range(slots))
    return Agent(agent_id, ids, ids[slots - (slots if free is None else free) :], pool)


def running(trial_id: int, exp: int, agent_id: str, slots: int, first: int = 0, **kw: object) -> RunningTrial:
    ids = tuple(f"{agent_id}/{i}" for i in range(first, first + slots))
    return RunningTrial(trial_id, exp, (Allocation(agent_id, ids),), **kw)  # type: ignore[arg-type]


def queued(trial_id: int, exp: int, slots: int = 1, pool: str = "default") -> QueuedTrial:
    return QueuedTrial(trial_id, exp, slots, pool)


def exps(*resources: ExperimentResources) -> dict[int, ExperimentResources]:
    return {r.experiment_id: r for r in resources}


def slots_by_experiment(state: ClusterState) -> dict[int, int]:
    decision = decide(state)
    by_trial = {q.trial_id: q for q in state.queued}
    out: dict[int, int] = {}
    for trial_id, allocation in decision.assignments.items():
        exp = by_trial[trial_id].experiment_id
        out[exp] = out.get(exp, 0) + sum(len(a.slot_ids) for a in allocation)
    return out


def test_trials_only_run_on_agents_of_their_pool() -> None:
    state = ClusterState(
        agents=[agent("cpu", 4, pool="cpu"), agent("gpu", 4, pool="gpu")],
        queued=[queued(1, 1, 2, "gpu"), queued(2, 1, 1, "cpu"), queued(3, 1, 1, "nowhere")],
    )
    decision = decide(state)
    assert decision.assignments == {
        1: (Allocation("gpu", ("gpu/0", "gpu/1")),),
        2: (Allocation("cpu", ("cpu/0",)),),
    }


def test_a_gang_gets_all_its_slots_on_one_agent_best_fit() -> None:
    state = ClusterState(agents=[agent("a", 8), agent("b", 8, free=3)], queued=[queued(1, 1, 3)])
    assert decide(state).assignments == {1: (Allocation("b", ("b/5", "b/6", "b/7")),)}


def test_a_gang_larger_than_any_agent_spreads_over_whole_agents() -> None:
    state = ClusterState(
        agents=[agent("a", 2), agent("b", 2), agent("c", 2, free=1)], queued=[queued(1, 1, 4)]
    )
    assert decide(state).assignments == {
        1: (Allocation("a", ("a/0", "a/1")), Allocation("b", ("b/0", "b/1")))
    }


def test_a_gang_is_never_partly_placed() -> None:
    # 5 free slots in all, but no agent has 4 and the 4-slot gang fits on one agent: it waits.
    state = ClusterState(agents=[agent("a", 4, free=3), agent("b", 4, free=2)], queued=[queued(1, 1, 4)])
    assert decide(state).assignments == {}
    # Larger than an agent, but not a whole number of idle agents: waits too.
    state = ClusterState(agents=[agent("a", 2), agent("b", 2, free=1)], queued=[queued(1, 1, 3)])
    assert decide(state).assignments == {}


def test_a_big_gang_that_does_not_fit_lets_smaller_trials_behind_it_start() -> None:
    state = ClusterState(agents=[agent("a", 4, free=2)], queued=[queued(1, 1, 4), queued(2, 1, 2)])
    assert list(decide(state).assignments) == [2]


def test_max_slots_caps_an_experiment() -> None:
    state = ClusterState(
        agents=[agent("a", 8)],
        running=[running(1, 1, "a", 2)],
        queued=[queued(i, 1) for i in range(2, 10)],
        experiments=exps(ExperimentResources(1, max_slots=5)),
    )
    assert slots_by_experiment(state) == {1: 3}


def test_weights_divide_slots_in_proportion() -> None:
    state = ClusterState(
        agents=[agent("a", 4), agent("b", 4)],
        queued=[queued(i, 1) for i in range(1, 20)] + [queued(i, 2) for i in range(20, 40)],
        experiments=exps(ExperimentResources(1, weight=1), ExperimentResources(2, weight=3)),
    )
    assert slots_by_experiment(state) == {1: 2, 2: 6}


def test_share_an_experiment_cannot_use_goes_to_the_others() -> None:
    state = ClusterState(
        agents=[agent("a", 8)],
        queued=[queued(1, 1)] + [queued(i, 2) for i in range(2, 20)],
        experiments=exps(ExperimentResources(1, weight=3), ExperimentResources(2, weight=1)),
    )
    assert slots_by_experiment(state) == {1: 1, 2: 7}


def test_running_trials_count_against_an_experiments_share() -> None:
    state = ClusterState(
        agents=[agent("a", 8, free=4)],
        running=[running(1, 1, "a", 4)],
        queued=[queued(i, 1) for i in range(2, 10)] + [queued(i, 2) for i in range(10, 20)],
    )
    assert slots_by_experiment(state) == {2: 4}


def test_oldest_trial_of_an_experiment_goes_first() -> None:
    state = ClusterState(
        agents=[agent("a", 2)], queued=[QueuedTrial(7, 1, 1, order=3), QueuedTrial(9, 1, 1, order=1)]
    )
    state2 = ClusterState(agents=[agent("a", 1)], queued=list(state.queued))
    assert list(decide(state).assignments) == [9, 7]
    assert list(decide(state2).assignments) == [9]


def test_higher_priority_goes_first_smaller_number_wins() -> None:
    state = ClusterState(
        agents=[agent("a", 2)],
        queued=[queued(1, 1), queued(2, 1), queued(3, 2), queued(4, 2)],
        experiments=exps(
            ExperimentResources(1, priority=50, weight=100), ExperimentResources(2, priority=10)
        ),
    )
    assert list(decide(state).assignments) == [3, 4]


def test_priority_preemption_stops_the_youngest_lower_priority_trials_needed() -> None:
    state = ClusterState(
        agents=[agent("a", 4, free=0), agent("b", 4, free=0)],
        running=[
            running(1, 1, "a", 2, order=1),
            running(2, 1, "a", 2, first=2, order=5),
            running(3, 2, "b", 4, order=9),  # same priority as the queued trial: never stopped
        ],
        queued=[queued(10, 3, 2)],
        experiments=exps(
            ExperimentResources(1, priority=60),
            ExperimentResources(2, priority=20),
            ExperimentResources(3, priority=20),
        ),
    )
    decision = decide(state)
    assert decision.preemptions == (2,)
    assert decision.assignments == {}


def test_preemption_uses_free_slots_and_holds_them_from_lower_priority_trials() -> None:
    state = ClusterState(
        agents=[agent("a", 4, free=2)],
        running=[running(1, 1, "a", 2)],
        queued=[queued(10, 2, 4), queued(11, 1, 1)],
        experiments=exps(ExperimentResources(1, priority=60), ExperimentResources(2, priority=1)),
    )
    decision = decide(state)
    assert decision.preemptions == (1,)
    assert decision.assignments == {}  # trial 11 must not take the slots kept for trial 10


def test_trials_already_stopping_are_not_preempted_again() -> None:
    state = ClusterState(
        agents=[agent("a", 4, free=0)],
        running=[running(1, 1, "a", 2, preempting=True), running(2, 1, "a", 2, first=2)],
        queued=[queued(10, 2, 2)],
        experiments=exps(ExperimentResources(1, priority=60), ExperimentResources(2, priority=1)),
    )
    assert decide(state).preemptions == ()


def test_a_multi_agent_gang_preempts_whole_agents() -> None:
    state = ClusterState(
        agents=[agent("a", 2, free=0), agent("b", 2, free=1), agent("c", 2, free=0)],
        running=[
            running(1, 1, "a", 2),
            running(2, 1, "b", 1),
            running(3, 1, "c", 1),
            running(4, 2, "c", 1, first=1),
        ],
        queued=[queued(10, 3, 4)],
        experiments=exps(
            ExperimentResources(1, priority=60),
            ExperimentResources(2, priority=5),
            ExperimentResources(3, priority=5),
        ),
    )
    assert sorted(decide(state).preemptions) == [1, 2]


def test_no_preemption_when_the_trial_could_never_fit() -> None:
    base = dict(
        running=[running(1, 1, "a", 2), running(2, 1, "b", 2)],
        experiments=exps(ExperimentResources(1, priority=60), ExperimentResources(2, priority=1)),
    )
    agents = [agent("a", 2, free=0), agent("b", 2, free=0)]
    for slots in (3, 6):
        assert decide(ClusterState(agents=agents, queued=[queued(10, 2, slots)], **base)).preemptions == ()
    pinned = ClusterState(
        agents=[agent("a", 2, free=0)],
        running=[running(1, 1, "a", 2, preemptible=False)],
        queued=[queued(10, 2, 1)],
        experiments=base["experiments"],
    )
    assert decide(pinned).preemptions == ()


def test_preemption_can_be_turned_off() -> None:
    state = ClusterState(
        agents=[agent("a", 2, free=0)],
        running=[running(1, 1, "a", 2)],
        queued=[queued(10, 2, 2)],
        experiments=exps(ExperimentResources(1, priority=60), ExperimentResources(2, priority=1)),
    )
    assert decide(state, SchedulingPolicy(priority_preemption=False)).preemptions == ()


def test_fair_share_preempts_only_when_asked() -> None:
    state = ClusterState(
        agents=[agent("a", 8, free=0)],
        running=[running(i, 1, "a", 1, first=i - 1, order=i) for i in range(1, 9)],
        queued=[queued(i, 2) for i in range(20, 30)],
    )
    assert decide(state).preemptions == ()
    decision = decide(state, SchedulingPolicy(fair_share_preemption=True))
    assert decision.preemptions == (8, 7, 6, 5)  # the youngest, down to an even split


def test_zero_slot_trials_start_without_slots_capped_per_agent() -> None:
    state = ClusterState(
        agents=[agent("a", 2, free=0), agent("b", 1, free=0)],
        running=[RunningTrial(1, 1, (Allocation("a", ()),))],
        queued=[queued(i, 1, 0) for i in range(10, 17)],
    )
    assert decide(state).assignments == {
        10: (Allocation("b", ()),),
        11: (Allocation("a", ()),),
    }
    capped = decide(state, SchedulingPolicy(zero_slot_trials_per_agent=3)).assignments
    assert sorted(capped) == [10, 11, 12, 13, 14]  # 2 more on a, 3 on b


def test_decisions_are_deterministic_whatever_the_input_order() -> None:
    rng = random.Random(7)
    agents = [agent(f"n{i}", 4, free=rng.randint(0, 4)) for i in range(12)]
    run = [running(100 + i, i % 3, f"n{i}", 4 - len(a.free_slot_ids)) for i, a in enumerate(agents)]
    run = [r for r in run if r.slots]
    q = [queued(i, i % 4, rng.choice([1, 2, 4, 8])) for i in range(60)]
    resources = exps(*(ExperimentResources(e, weight=e + 1, priority=30 + 10 * (e % 2)) for e in range(4)))
    first = decide(ClusterState(agents, run, q, resources))
    for _ in range(5):
        rng.shuffle(agents)
        rng.shuffle(run)
        rng.shuffle(q)
        again = decide(ClusterState(list(agents), list(run), list(q), resources))
        assert again == first
        assert list(again.assignments) == list(first.assignments)


def test_fair_share_preemption_only_takes_from_experiments_above_their_share() -> None:
    # 8 slots, three equal weights: exp 2 wants just its 2, so exps 1 and 3 are owed 3 each.
    state = ClusterState(
        agents=[agent("a", 8, free=0)],
        running=[running(i, 1, "a", 1, first=i - 1, order=i) for i in range(1, 7)]
        + [running(i, 2, "a", 1, first=i - 1, order=i) for i in (7, 8)],
        queued=[queued(i, 3) for i in range(20, 30)],
    )
    decision = decide(state, SchedulingPolicy(fair_share_preemption=True))
    assert decision.preemptions == (6, 5, 4)


def test_unknown_experiments_get_default_resources() -> None:
    state = ClusterState(
        agents=[agent("a", 1, free=0)],
        running=[running(1, 1, "a", 1)],
        queued=[queued(2, 2)],
        experiments=exps(ExperimentResources(2, priority=41)),  # exp 1: default priority 42
    )
    assert decide(state).preemptions == (1,)


def exiting_agent(agent_id: str, slots: int, free: int, exiting: int) -> Agent:
    """An agent whose first `exiting` busy slots belong to runs told to terminate (handoff slots)."""
    base = agent(agent_id, slots, free)
    return Agent(agent_id, base.slot_ids, base.free_slot_ids, handoff_slot_ids=base.slot_ids[:exiting])


def test_a_queued_trial_takes_over_slots_whose_runs_are_exiting_only_when_none_is_free() -> None:
    state = ClusterState(
        agents=[exiting_agent("a", 2, free=0, exiting=1), agent("b", 1, free=1)],
        running=[running(1, 1, "a", 1, preempting=True), running(2, 1, "a", 1, first=1)],
        queued=[queued(10, 1), queued(11, 1), queued(12, 1)],
    )
    decision = decide(state)
    # 10 takes the free slot; 11 takes over trial 1's slot as it exits; 12 waits (2 is not exiting).
    assert decision.assignments == {10: (Allocation("b", ("b/0",)),), 11: (Allocation("a", ("a/0",)),)}
    assert decision.preemptions == ()


def test_a_handoff_is_taken_before_anything_is_preempted() -> None:
    state = ClusterState(
        agents=[exiting_agent("a", 2, free=0, exiting=1)],
        running=[running(1, 1, "a", 1, preempting=True), running(2, 1, "a", 1, first=1)],
        queued=[queued(10, 2, 1), queued(11, 2, 1)],
        experiments=exps(ExperimentResources(1, priority=60), ExperimentResources(2, priority=1)),
    )
    decision = decide(state)
    assert decision.assignments == {10: (Allocation("a", ("a/0",)),)}
    assert decision.preemptions == (2,)  # for trial 11, which starts once 2 has checkpointed


def test_a_gang_never_counts_on_slots_already_handed_off() -> None:
    state = ClusterState(
        agents=[exiting_agent("a", 2, free=0, exiting=2)],
        running=[running(1, 1, "a", 2, preempting=True)],
        queued=[queued(10, 2, 1), queued(11, 2, 2)],
        experiments=exps(ExperimentResources(1, priority=60), ExperimentResources(2, priority=1)),
    )
    decision = decide(state)
    assert decision.assignments == {10: (Allocation("a", ("a/0",)),)}
    assert decision.preemptions == ()  # trial 1's slots went to trial 10: no plan may reclaim them


def test_an_exiting_runs_slot_goes_by_weight_as_if_it_were_already_free() -> None:
    # Weights 1 and 3 on 4 slots, held 1 and 3; one of the heavy experiment's runs is exiting. Its
    # slot goes back to the heavy experiment (2/3 < 1/1), as it would once free: counting the exiting
    # run against its experiment tied the two and gave the light one the slot, settling at 2 and 2.
    state = ClusterState(
        agents=[exiting_agent("a", 4, free=0, exiting=1)],
        running=[
            running(1, 2, "a", 1, preempting=True),
            running(2, 2, "a", 2, first=1),
            running(3, 1, "a", 1, first=3),
        ],
        queued=[queued(10, 1), queued(20, 2)],
        experiments=exps(ExperimentResources(1, weight=1), ExperimentResources(2, weight=3)),
    )
    assert decide(state).assignments == {20: (Allocation("a", ("a/0",)),)}


@pytest.mark.parametrize(
    ("exiting_experiment", "weights", "expected_taker"),
    [
        # Weight 3 holds 3 of 4 slots, weight 1 holds 1; whichever's trial ends, 3:1 is kept.
        (2, {1: 1.0, 2: 3.0}, 2),
        (1, {1: 1.0, 2: 3.0}, 1),
        # Equal weights at 1:3: the slot goes to the one holding fewer, even when its trial is leaving.
        (2, {1: 1.0, 2: 1.0}, 1),
        (1, {1: 1.0, 2: 1.0}, 1),
        # Weight 3 on one slot next to weight 1 on three: the weight-3 experiment is owed the slot.
        (2, {1: 3.0, 2: 1.0}, 1),
    ],
)
def test_a_slot_handed_off_goes_to_whoever_holds_fewest_per_weight_once_the_exiting_run_is_gone(
    exiting_experiment: int, weights: dict[int, float], expected_taker: int
) -> None:
    # Experiment 1 holds slot a/0, experiment 2 slots a/1-a/3; one run of `exiting_experiment` is
    # terminating, and both experiments queue a trial.
    exiting_slot = 0 if exiting_experiment == 1 else 1
    holders = {0: 1, 1: 2, 2: 2, 3: 2}
    state = ClusterState(
        agents=[Agent("a", agent("a", 4).slot_ids, (), handoff_slot_ids=(f"a/{exiting_slot}",))],
        running=[
            running(slot + 1, exp, "a", 1, first=slot, preempting=slot == exiting_slot)
            for slot, exp in holders.items()
        ],
        queued=[queued(10, 1), queued(20, 2)],
        experiments=exps(*(ExperimentResources(e, weight=w) for e, w in weights.items())),
    )
    decision = decide(state)
    takers = {q.experiment_id for q in state.queued if q.trial_id in decision.assignments}
    assert takers == {expected_taker}
    assert decision.preemptions == ()
