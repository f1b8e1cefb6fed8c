"""What a Slurm pool should submit and cancel, given its queued trials and its pilot jobs: no I/O.

A pilot job is one `pedl-agent` per node for the job's life. Queued trials are matched first to free
slots of pilot agents already connected, then to jobs still waiting (pending, or running before their
agents have registered); what is left gets new jobs, packed `slots_per_node` to a node, a gang
larger than a node spread over several nodes of one job. Jobs still pending that no trial needs any
more are cancelled; running pilots leave by themselves once idle (`pedl-agent --exit-when-idle`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

# Slurm job states in which the job will run or runs (squeue's long names).
WAITING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "RESIZING"})
LIVE_STATES = WAITING_STATES | {"RUNNING", "COMPLETING"}


@dataclass(frozen=True)
class JobShape:
    """What one node of a pilot job offers: from the pool and the experiment's `slurm:` section."""

    slots_per_node: int = 1
    gpu: bool = False
    gpu_type: str = ""
    sbatch_args: tuple[str, ...] = ()

    def nodes_for(self, slots: int) -> int:
        return max(1, math.ceil(max(slots, 1) / self.slots_per_node))


@dataclass(frozen=True)
class Demand:
    """One queued trial of the pool; `slots` 0 (a CPU-only trial) still needs an agent to run on."""

    trial_id: int
    slots: int
    shape: JobShape


@dataclass(frozen=True)
class PilotJob:
    """A pilot job Slurm lists. `shape` None: submitted by an earlier scheduler process (left alone).

    `free_slots`: free slots of each of its agents that has registered.
    """

    job_id: str
    shape: JobShape | None
    nodes: int
    state: str
    reason: str = ""
    free_slots: tuple[int, ...] = ()


@dataclass(frozen=True)
class Request:
    """A pilot job to submit: `nodes` nodes of `shape`, one agent each."""

    shape: JobShape
    nodes: int


@dataclass(frozen=True)
class Plan:
    submit: tuple[Request, ...] = ()
    cancel: tuple[str, ...] = ()
    # trial id -> the job it waits for (None: a new job this plan submits)
    waits_on: dict[int, str | None] = field(default_factory=dict)


@dataclass
class _Bins:
    """Free slots per node of one job; `job_id` None for a job this plan submits."""

    job_id: str | None
    shape: JobShape
    free: list[int]
    started: bool  # its agents are connected: the scheduler places on them itself


def plan(demand: Sequence[Demand], jobs: Sequence[PilotJob], max_jobs: int) -> Plan:
    """Jobs to submit (at most `max_jobs` live at once) and pending jobs to cancel."""
    bins: list[_Bins] = []
    for job in jobs:
        if job.shape is None or job.state not in LIVE_STATES:
            continue
        spn = job.shape.slots_per_node
        unregistered = max(job.nodes - len(job.free_slots), 0)
        if job.free_slots:
            bins.append(_Bins(job.job_id, job.shape, list(job.free_slots), True))
        if unregistered:
            bins.append(_Bins(job.job_id, job.shape, [spn] * unregistered, False))
    used: set[str] = set()
    live = sum(1 for j in jobs if j.state in LIVE_STATES)
    submit: list[Request] = []
    waits_on: dict[int, str | None] = {}
    for d in demand:
        units = max(d.slots, 1)
        found = _fit(bins, d.shape, units)
        if found is not None:
            if found.job_id is not None:
                used.add(found.job_id)
            waits_on[d.trial_id] = found.job_id
            continue
        if live + len(submit) >= max_jobs:
            continue
        nodes = d.shape.nodes_for(units)
        submit.append(Request(d.shape, nodes))
        new = _Bins(None, d.shape, [d.shape.slots_per_node] * nodes, False)
        _take(new, units)
        bins.append(new)
        waits_on[d.trial_id] = None
    cancel = tuple(
        j.job_id
        for j in jobs
        if j.shape is not None and j.state in WAITING_STATES and not j.free_slots and j.job_id not in used
    )
    return Plan(tuple(submit), cancel, waits_on)


def _fit(bins: list[_Bins], shape: JobShape, units: int) -> _Bins | None:
    """The bins that take `units` slots of `shape` (best fit: the fewest free left), taken from them."""
    best: _Bins | None = None
    for b in bins:
        if b.shape != shape or sum(b.free) < units:
            continue
        if units > shape.slots_per_node and b.started:
            continue  # a gang over connected agents: the scheduler would have placed it already
        if units <= shape.slots_per_node and max(b.free) < units:
            continue
        if best is None or sum(b.free) < sum(best.free):
            best = b
    if best is not None:
        _take(best, units)
    return best


def _take(b: _Bins, units: int) -> None:
    """Takes `units` slots: on one node when they fit on one, else whole nodes first."""
    if units <= max(b.free):
        i = min((i for i, f in enumerate(b.free) if f >= units), key=lambda i: b.free[i])
        b.free[i] -= units
        return
    for i, f in enumerate(b.free):
        take = min(f, units)
        b.free[i] -= take
        units -= take
        if units == 0:
            return
