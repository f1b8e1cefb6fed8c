"""What a scheduling pass shows the policy of slots handed off between runs, and what it decides."""

from __future__ import annotations

import pytest

from pedl_scheduler import scheduling as sch
from pedl_scheduler.experiments.scheduling_pass import slots_held


@pytest.mark.parametrize(
    ("next_by_slot", "trial_id", "slots", "held"),
    [
        ({}, 1, ("a", "b"), ("a", "b")),  # no handoff on the agent
        ({"a": 2}, 1, ("a", "b"), ("b",)),  # trial 1 is exiting: slot a is trial 2's already
        ({"a": 2}, 2, ("a",), ("a",)),  # trial 2 waits on a to start: it is trial 2's
        ({"a": 2, "b": 3}, 2, ("a", "b"), ("a",)),  # b is promised to trial 3
        ({"a": 2}, 3, (), ()),  # a CPU-only trial holds no slot
    ],
)
def test_a_handed_off_slot_counts_as_its_takers_not_its_exiting_holders(
    next_by_slot: dict[str, int], trial_id: int, slots: tuple[str, ...], held: tuple[str, ...]
) -> None:
    assert slots_held(next_by_slot, trial_id, slots) == held


def test_a_weight_3_experiment_keeps_3_of_4_slots_while_runs_hand_slots_over() -> None:
    # Weight 1 (experiment 1): trial 7 exits and trial 8 waits to take over its slot s3.
    # Weight 3 (experiment 2): trials 15 and 16 run, trial 14 exits from s0 with nobody after it.
    slots = ("s0", "s1", "s2", "s3")
    next_by_slot = {"s3": 8}
    held = {7: (1, "s3", True), 8: (1, "s3", False), 14: (2, "s0", True)}
    held |= {15: (2, "s1", False), 16: (2, "s2", False)}
    running = [
        sch.RunningTrial(
            t, exp, (sch.Allocation("a", slots_held(next_by_slot, t, (slot,))),), preempting=leaving
        )
        for t, (exp, slot, leaving) in held.items()
    ]
    state = sch.ClusterState(
        agents=[sch.Agent("a", slots, (), handoff_slot_ids=("s0",))],
        running=[t for t in running if t.slots],
        queued=[sch.QueuedTrial(9, 1, 1), sch.QueuedTrial(17, 2, 1)],
        experiments={1: sch.ExperimentResources(1, weight=1.0), 2: sch.ExperimentResources(2, weight=3.0)},
    )
    # Once 7 and 14 are gone, experiment 1 holds 1 slot (8) and experiment 2 holds 2: s0 is owed to 2.
    assert sch.decide(state).assignments == {17: (sch.Allocation("a", ("s0",)),)}
