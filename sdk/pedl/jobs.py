"""The cluster's jobs as Determined's job queue shows them (`det job list`), read from what the
scheduler reports: each active experiment is a job holding the slots of its running trials out of
those its unfinished trials want, and each Slurm pilot job an external job providing a pool's slots.

pedl serves every pool in weighted fair share, so a job's place (`jobs_ahead`) is descriptive:
scheduled jobs first, then queued ones, each in submission order. Pure: pedl's CLI and the REST API
shape the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pedl import records
from pedl.config import ExperimentConfig
from pedl.config.received import experiment_config
from pedl.v1 import common_pb2, scheduler_pb2

# An RPC of the scheduler's by name: the CLI's client and the REST API's caller both have one.
Call = Callable[[str, Any], Any]

QUEUED, SCHEDULED = "QUEUED", "SCHEDULED"
EXPERIMENT, EXTERNAL = "EXPERIMENT", "EXTERNAL"
# Determined's default priority, shown for experiments whose config sets none.
DEFAULT_PRIORITY = 42
_EXPERIMENT_PREFIX, _SLURM_PREFIX = "experiment-", "slurm-"


@dataclass(frozen=True)
class Job:
    job_id: str
    kind: str  # EXPERIMENT or EXTERNAL
    entity_id: str  # the experiment's id, or the Slurm job's
    name: str
    resource_pool: str
    state: str  # QUEUED or SCHEDULED
    submitted: str  # ISO 8601, "" when unknown
    username: str
    allocated_slots: int
    requested_slots: int
    weight: float
    priority: int
    jobs_ahead: int = 0


def experiment_job(
    exp: scheduler_pb2.Experiment, config: ExperimentConfig | None, trials: Iterable[scheduler_pb2.Trial]
) -> Job:
    """An active experiment: slots held by its running trials of those its unfinished ones want
    (slots_per_trial each; 0 for CPU-only trials); scheduled once one of them runs."""
    per_trial = config.slots_per_trial if config is not None else 1
    active = [t for t in trials if records.trial_state(t.state) == "ACTIVE"]
    running = sum(1 for t in active if t.agent_id)
    resources = config.resources if config is not None else None
    return Job(
        job_id=f"{_EXPERIMENT_PREFIX}{exp.id}",
        kind=EXPERIMENT,
        entity_id=str(exp.id),
        name=exp.name or f"Experiment {exp.id}",
        resource_pool=config.resource_pool if config is not None else "default",
        state=SCHEDULED if running else QUEUED,
        submitted=exp.created_at,
        username=exp.owner,
        allocated_slots=per_trial * running,
        requested_slots=per_trial * len(active),
        weight=resources.weight if resources is not None else 1.0,
        priority=resources.priority
        if resources is not None and resources.priority is not None
        else DEFAULT_PRIORITY,
    )


def pilot_job(job: scheduler_pb2.PilotJob) -> Job:
    """A Slurm pool's pilot job: it provides slots rather than using them (0/0); its name says
    whose it is and why it waits."""
    where = f"Slurm job {job.job_id} (pedl pilot agents, partition {job.partition})"
    if job.state == "PENDING":
        name = f"{where}: PENDING ({job.reason})"
    else:
        on = f" on {job.node_list}" if job.node_list else ""
        left = f", {job.time_left} left" if job.time_left else ""
        name = f"{where}: {job.state}{on}{left}"
    return Job(
        job_id=f"{_SLURM_PREFIX}{job.job_id}",
        kind=EXTERNAL,
        entity_id=job.job_id,
        name=name,
        resource_pool=job.resource_pool,
        state=QUEUED if job.state == "PENDING" else SCHEDULED,
        submitted=job.submit_time,
        username="pedl",
        allocated_slots=0,
        requested_slots=0,
        weight=1.0,
        priority=0,
    )


def gather(call: Call) -> list[Job]:
    """The pilot jobs and every active experiment the caller may see, as jobs (unordered)."""
    found = [pilot_job(j) for j in call("ListAgents", scheduler_pb2.ListAgentsRequest()).pilot_jobs]
    token = ""
    while True:
        listed = call(
            "ListExperiments",
            scheduler_pb2.ListExperimentsRequest(
                states=[common_pb2.EXPERIMENT_STATE_ACTIVE], with_config_document=True, page_token=token
            ),
        )
        for exp in listed.experiments:
            trials = call("GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=exp.id)).trials
            found.append(experiment_job(exp, experiment_config(exp), trials))
        token = listed.next_page_token
        if not token:
            return found


def in_order(jobs: Iterable[Job], pool: str = "", states: Sequence[str] = ()) -> list[Job]:
    """The pool's jobs (every pool's for ""), scheduled first, then queued, each in submission
    order, with how many of its pool's jobs are ahead of it; only those in `states` if given."""
    chosen = [j for j in jobs if not pool or j.resource_pool == pool]
    chosen.sort(key=lambda j: (j.state == QUEUED, j.submitted, j.kind != EXTERNAL, _number(j.entity_id)))
    ahead: dict[str, int] = {}
    placed = []
    for j in chosen:
        placed.append(replace(j, jobs_ahead=ahead.get(j.resource_pool, 0)))
        ahead[j.resource_pool] = ahead.get(j.resource_pool, 0) + 1
    return [j for j in placed if not states or j.state in states]


def experiment_of(job_id: str) -> int:
    """The experiment a job id names; ValueError (a pilot job) or LookupError (no such job), one line."""
    number = job_id.removeprefix(_EXPERIMENT_PREFIX)
    if job_id.startswith(_EXPERIMENT_PREFIX) and number.isdigit():
        return int(number)
    if job_id.startswith(_SLURM_PREFIX):
        raise ValueError(f"job {job_id[:40]} is a Slurm pilot job: Slurm orders it, not pedl")
    raise LookupError(f"no job {job_id[:40]} (pedl's jobs are experiment-<id> and slurm-<job>)")


def _number(text: str) -> int:
    return int(text) if text.isdigit() else 2**63
