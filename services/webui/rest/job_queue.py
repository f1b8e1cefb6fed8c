"""Determined's job queue (`det job list`: /api/v1/job-queues and -v2) for what pedl queues outside
its own scheduler: the Slurm pools' pilot jobs, pending ones with Slurm's reason in the job name.

A pilot job provides a pool's slots rather than using them, so its slots read 0/0; it is a job of
Determined's TYPE_EXTERNAL (one the cluster's workload manager runs). pedl's trials wait in its own
fair-share order, which `pedl slot list` and the web UI's cluster page show, not here.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.common import caller, int_param, ok, page
from pedl_webui.rest.errors import lacking

_STATES = ("STATE_QUEUED", "STATE_SCHEDULED")
# When squeue printed no submit time (Determined's clients need one).
_EPOCH = "1970-01-01T00:00:00+00:00"


def pilot_state(job: scheduler_pb2.PilotJob) -> str:
    return "STATE_QUEUED" if job.state == "PENDING" else "STATE_SCHEDULED"


def pilot_name(job: scheduler_pb2.PilotJob) -> str:
    """What `det job list` prints as the job's name: whose job it is, and why it waits."""
    where = f"Slurm job {job.job_id} (pedl pilot agents, partition {job.partition})"
    if job.state == "PENDING":
        return f"{where}: PENDING ({job.reason})"
    on = f" on {job.node_list}" if job.node_list else ""
    left = f", {job.time_left} left" if job.time_left else ""
    return f"{where}: {job.state}{on}{left}"


def pilot_job_json(job: scheduler_pb2.PilotJob, jobs_ahead: int) -> dict[str, Any]:
    return {
        "summary": {"state": pilot_state(job), "jobsAhead": jobs_ahead},
        "type": "TYPE_EXTERNAL",
        "submissionTime": job.submit_time or _EPOCH,
        "username": "pedl",
        "resourcePool": job.resource_pool,
        # A pilot near its walltime (or preempted by Slurm) hands its trials back to be resumed.
        "isPreemptible": True,
        "priority": 0,
        "weight": 1,
        "entityId": job.job_id,
        "jobId": f"slurm-{job.job_id}",
        "requestedSlots": 0,
        "allocatedSlots": 0,
        "name": pilot_name(job),
        "progress": 0,
        "workspaceId": 1,
    }


def queue(pilots: list[scheduler_pb2.PilotJob], pool: str, states: list[str]) -> list[dict[str, Any]]:
    """The pool's jobs (every pool's for ""), running ones first, then pending ones in submission
    order, each with how many of its pool's jobs are ahead of it."""
    chosen = [j for j in pilots if not pool or j.resource_pool == pool]
    ordered = sorted(chosen, key=lambda j: (j.state == "PENDING", j.submit_time, int_or_max(j.job_id)))
    ahead: dict[str, int] = {}
    rows = []
    for j in ordered:
        rows.append(pilot_job_json(j, ahead.get(j.resource_pool, 0)))
        ahead[j.resource_pool] = ahead.get(j.resource_pool, 0) + 1
    return [r for r in rows if not states or r["summary"]["state"] in states]


def int_or_max(text: str) -> int:
    return int(text) if text.isdigit() else 2**63


def _rows(request: Request) -> tuple[list[dict[str, Any]], int, int]:
    q = request.query_params
    states = q.getlist("states")
    for s in states:
        if s not in _STATES:
            raise GatewayError(400, f"no job state {s[:40]} (one of {', '.join(_STATES)})")
    order = q.get("orderBy") or "ORDER_BY_UNSPECIFIED"
    if order not in ("ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise GatewayError(400, f"orderBy must be ORDER_BY_ASC or ORDER_BY_DESC, not {order[:40]}")
    listed = caller(request).call("ListAgents", scheduler_pb2.ListAgentsRequest())
    rows = queue(list(listed.pilot_jobs), q.get("resourcePool") or "", states)
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


def update(request: Request) -> JSONResponse:
    """UpdateJobQueue (`det job update`): pedl's order is fair share, not a queue one moves jobs in."""
    raise lacking("job queue controls (pedl serves trials in fair-share order)")
