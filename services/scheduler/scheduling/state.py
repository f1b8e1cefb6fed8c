"""What the scheduling policy sees and what it answers: plain immutable values, no I/O.

Priorities follow Determined's convention: 1-99, a smaller number is a higher priority,
42 when the experiment config sets none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_PRIORITY = 42
DEFAULT_POOL = "default"
DEFAULT_ENVIRONMENT = "default"


@dataclass(frozen=True)
class Allocation:
    """Slots one trial holds (or is given) on one agent; a CPU-only trial holds no slot."""

    agent_id: str
    slot_ids: tuple[str, ...]


@dataclass(frozen=True)
class Agent:
    """`environments`: the Python environments (by name) this agent can start a harness in.

    `handoff_slot_ids`: slots held by runs already told to terminate, which nobody has been
    given yet. A trial placed on them (a handoff) starts on the agent the moment they exit.

    `slot_types`: the type of each of `slot_ids` ("gpu", "cpu"), or empty when all are of one
    kind; a gang never mixes types (`slot_types.py`).
    """

    agent_id: str
    slot_ids: tuple[str, ...]
    free_slot_ids: tuple[str, ...]
    resource_pool: str = DEFAULT_POOL
    environments: frozenset[str] = frozenset({DEFAULT_ENVIRONMENT})
    handoff_slot_ids: tuple[str, ...] = ()
    slot_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunningTrial:
    """A trial holding slots now.

    `order` is when it started (larger is younger; ties by trial id): preemption stops the
    youngest first, so the least work is thrown away. `preempting` marks a trial already
    told to checkpoint and stop, or to terminate: its slots are about to free and it is never
    chosen again. `allocations` leave out slots already handed off to the trial after it.
    """

    trial_id: int
    experiment_id: int
    allocations: tuple[Allocation, ...]
    preemptible: bool = True
    preempting: bool = False
    order: int = 0

    @property
    def slots(self) -> int:
        return sum(len(a.slot_ids) for a in self.allocations)


@dataclass(frozen=True)
class QueuedTrial:
    """A trial waiting for slots; within an experiment, smaller (order, trial id) goes first.

    It runs only on agents offering its `environment` (the experiment config's `environment`).
    """

    trial_id: int
    experiment_id: int
    slots: int
    resource_pool: str = DEFAULT_POOL
    order: int = 0
    environment: str = DEFAULT_ENVIRONMENT


@dataclass(frozen=True)
class ExperimentResources:
    """The `resources` section that matters to scheduling; an experiment not listed gets these defaults."""

    experiment_id: int
    weight: float = 1.0
    max_slots: int | None = None
    priority: int = DEFAULT_PRIORITY


@dataclass(frozen=True)
class ClusterState:
    agents: Sequence[Agent] = ()
    running: Sequence[RunningTrial] = ()
    queued: Sequence[QueuedTrial] = ()
    experiments: Mapping[int, ExperimentResources] = field(default_factory=dict)

    def resources(self, experiment_id: int) -> ExperimentResources:
        return self.experiments.get(experiment_id) or ExperimentResources(experiment_id)


@dataclass(frozen=True)
class SchedulingPolicy:
    """Knobs of `decide`.

    `priority_preemption`: a queued trial may stop running trials of lower priority.
    `fair_share_preemption`: a trial of an experiment below its weighted share may also stop
    trials of same-priority experiments above theirs (off by default, as the churn costs work).
    `zero_slot_trials_per_agent`: how many CPU-only trials one agent runs at once; None means
    as many as the agent has slots (at least one).
    """

    priority_preemption: bool = True
    fair_share_preemption: bool = False
    zero_slot_trials_per_agent: int | None = None


@dataclass(frozen=True)
class Decision:
    """What to do this tick.

    `assignments` maps trial id to where it starts, in the order the trials were chosen; a
    trial spread over agents has one allocation per agent. An assignment to handoff slots
    starts as their runs exit. `preemptions` are running trial ids to checkpoint and stop;
    the trials they make room for start in a later tick.
    """

    assignments: dict[int, tuple[Allocation, ...]]
    preemptions: tuple[int, ...]
