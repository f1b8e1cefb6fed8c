"""Scheduling policy cost: milliseconds per `decide` call on a large simulated cluster.

100 agents x 8 slots and 1,000 queued trials of 1, 2, 4, 8 and 16 slots from 12
experiments with mixed weights and priorities, in three states: an idle cluster, a
half-full one (running trials of every priority, so high-priority work preempts), and a
full one. Figures are compared with Determined's 500 ms scheduling interval.

    .venv/bin/python benchmarks/scheduling_tick.py [--ticks 50] [--seed 1] [--smoke]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

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

AGENTS, SLOTS, QUEUED, EXPERIMENTS = 100, 8, 1000, 12
SIZES = (1, 1, 1, 2, 2, 4, 8, 16)
DETERMINED_TICK_MS = 500.0


def build_state(rng: random.Random, fill: float) -> ClusterState:
    """A cluster with about `fill` of its slots held by running trials, and a long queue."""
    experiments = {
        e: ExperimentResources(e, weight=rng.choice((1, 1, 2, 3)), priority=rng.choice((20, 42, 42, 60)))
        for e in range(EXPERIMENTS)
    }
    size_of = {e: rng.choice(SIZES) for e in experiments}  # slots_per_trial is per experiment
    running: list[RunningTrial] = []
    used = dict.fromkeys(range(AGENTS), 0)
    open_agents = set(range(AGENTS))
    trial_id = 0
    while sum(used.values()) < fill * AGENTS * SLOTS and open_agents:
        i = rng.choice(sorted(open_agents))
        fits = [e for e in experiments if size_of[e] <= SLOTS - used[i]]
        if not fits:
            open_agents.discard(i)  # nothing fits its remainder: those slots stay idle
            continue
        e = rng.choice(fits)
        trial_id += 1
        slot_ids = tuple(f"gpu{s}" for s in range(used[i], used[i] + size_of[e]))
        running.append(RunningTrial(trial_id, e, (Allocation(f"agent{i:03d}", slot_ids),), order=trial_id))
        used[i] += size_of[e]
    ids = tuple(f"gpu{s}" for s in range(SLOTS))
    agents = [Agent(f"agent{i:03d}", ids, ids[used[i] :]) for i in range(AGENTS)]
    queued = []
    for _ in range(QUEUED):
        trial_id += 1
        e = rng.randrange(EXPERIMENTS)
        queued.append(QueuedTrial(trial_id, e, size_of[e], order=trial_id))
    return ClusterState(agents, running, queued, experiments)


def time_ticks(state: ClusterState, ticks: int, policy: SchedulingPolicy) -> list[float]:
    out = []
    for _ in range(ticks):
        start = time.perf_counter()
        decide(state, policy)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="one tick per state: checks it runs")
    args = parser.parse_args()
    if args.smoke:
        args.ticks = 1
    rng = random.Random(args.seed)
    print(f"{AGENTS} agents x {SLOTS} slots, {QUEUED} queued trials, {EXPERIMENTS} experiments")
    header = (
        f"{'state':<34}{'used':>6}{'start':>7}{'preempt':>9}{'mean ms':>10}{'median ms':>11}{'of 500 ms':>11}"
    )
    print(header)
    for name, fill, policy in (
        ("idle cluster", 0.0, SchedulingPolicy()),
        ("half full", 0.5, SchedulingPolicy()),
        ("half full, fair-share preemption", 0.5, SchedulingPolicy(fair_share_preemption=True)),
        ("full", 1.0, SchedulingPolicy()),
        ("full, fair-share preemption", 1.0, SchedulingPolicy(fair_share_preemption=True)),
    ):
        state = build_state(rng, fill)
        decision = decide(state, policy)
        ms = time_ticks(state, args.ticks, policy)
        used = sum(t.slots for t in state.running)
        mean, median = statistics.mean(ms), statistics.median(ms)
        print(
            f"{name:<34}{used:>6}{len(decision.assignments):>7}{len(decision.preemptions):>9}"
            f"{mean:>10.2f}{median:>11.2f}{mean / DETERMINED_TICK_MS:>10.1%}"
        )


if __name__ == "__main__":
    main()
