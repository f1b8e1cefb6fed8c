"""Determined's job queue (`det job list`: /api/v1/job-queues and -v2; `det job update`): pedl's
active experiments as TYPE_EXPERIMENT jobs and the Slurm pools' pilot jobs as TYPE_EXTERNAL ones
(`pedl.jobs` decides what each row says; this module speaks Determined's JSON).

pedl serves its pools in weighted fair share, not in a queue order: `det job update` changes an
experiment's weight or priority (as `det e set weight` does) and refuses, in one line, to move a job
ahead of or behind another or to another pool.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl import jobs as job_rows
from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.common import body, caller, int_param, ok, page

_STATES = ("STATE_QUEUED", "STATE_SCHEDULED")
# What `det job update` may ask that a fair-share pool has no meaning for.
_MOVES = ("aheadOf", "behindOf", "queuePosition", "resourcePool")
# When squeue printed no submit time (Determined's clients need one).
_EPOCH = "1970-01-01T00:00:00+00:00"


def job_json(job: job_rows.Job) -> dict[str, Any]:
    return {
        "summary": {"state": f"STATE_{job.state}", "jobsAhead": job.jobs_ahead},
        "type": f"TYPE_{job.kind}",
        "submissionTime": job.submitted or _EPOCH,
        "username": job.username or "admin",
        "resourcePool": job.resource_pool,
        # pedl pauses and resumes any trial from its checkpoint; a pilot near its walltime (or
        # preempted by Slurm) hands its trials back to be resumed.
        "isPreemptible": True,
        "priority": job.priority,
        "weight": job.weight,
        "entityId": job.entity_id,
        "jobId": job.job_id,
        "requestedSlots": job.requested_slots,
        "allocatedSlots": job.allocated_slots,
        "name": job.name,
        "progress": 0,
        "workspaceId": 1,
    }


def _rows(request: Request) -> tuple[list[dict[str, Any]], int, int]:
    q = request.query_params
    states = q.getlist("states")
    for s in states:
        if s not in _STATES:
            raise GatewayError(400, f"no job state {s[:40]} (one of {', '.join(_STATES)})")
    order = q.get("orderBy") or "ORDER_BY_UNSPECIFIED"
    if order not in ("ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise GatewayError(400, f"orderBy must be ORDER_BY_ASC or ORDER_BY_DESC, not {order[:40]}")
    wanted = [s.removeprefix("STATE_") for s in states]
    rows = [
        job_json(j)
        for j in job_rows.in_order(job_rows.gather(caller(request).call), q.get("resourcePool") or "", wanted)
    ]
    if order == "ORDER_BY_DESC":
        rows.reverse()
    return rows, int_param(request, "offset", 0, -(2**31)), int_param(request, "limit", 0)


def jobs(request: Request) -> JSONResponse:
    """GetJobs (`/api/v1/job-queues`)."""
    rows, offset, limit = _rows(request)
    return ok(page(rows, offset, limit, "jobs"))


def jobs_v2(request: Request) -> JSONResponse:
    """GetJobsV2 (`/api/v1/job-queues-v2`, what `det job list` reads): every job in full."""
    rows, offset, limit = _rows(request)
    paged = page(rows, offset, limit, "jobs")
    return ok({**paged, "jobs": [{"full": j} for j in paged["jobs"]]})


async def update(request: Request) -> JSONResponse:
    """UpdateJobQueue (`det job update`): an experiment's weight or priority, as PatchExperiment
    sets them (and refuses a caller who may not); every update is checked before any is made."""
    updates = (await body(request, {"updates": list}))["updates"] or []
    patches = []
    for u in updates:
        if not isinstance(u, dict) or not isinstance(u.get("jobId"), str):
            raise GatewayError(400, 'each of "updates" needs a "jobId"')
        moves = [k for k in _MOVES if u.get(k) not in (None, "")]
        if moves:
            raise GatewayError(
                400,
                f"pedl serves each pool in weighted fair share, not a queue order: {moves[0]} is not "
                "supported (change the job's weight or priority)",
            )
        try:
            patch = scheduler_pb2.PatchExperimentRequest(experiment_id=job_rows.experiment_of(u["jobId"]))
        except ValueError as e:
            raise GatewayError(400, str(e)) from None
        except LookupError as e:
            raise GatewayError(404, str(e)) from None
        if u.get("weight") is not None:
            patch.weight = float(u["weight"])
        if u.get("priority") is not None:
            patch.priority = int(u["priority"])
        patches.append(patch)
    c = caller(request)
    for patch in patches:
        await run_in_threadpool(c.call, "PatchExperiment", patch)
    return ok({})
