"""Determined's job queue as pedl fills it from the Slurm pools' pilot jobs (no server, no Slurm)."""

from __future__ import annotations

from pedl.v1 import scheduler_pb2
from pedl_scheduler.slurm.commands import utc_time
from pedl_webui.rest.job_queue import queue
from pedl_webui.rest.shapes import slurm_placement


def pilot(job_id: str, pool: str, state: str, reason: str, submitted: str) -> scheduler_pb2.PilotJob:
    return scheduler_pb2.PilotJob(
        job_id=job_id, resource_pool=pool, partition="gpu", state=state, reason=reason, nodes=1,
        node_list="n1" if state == "RUNNING" else "", time_left="4:00" if state == "RUNNING" else "",
        submit_time=submitted,
    )  # fmt: skip


JOBS = [
    pilot("12", "hpc", "PENDING", "Priority", "2026-01-01T00:00:02+00:00"),
    pilot("11", "hpc", "PENDING", "Resources", "2026-01-01T00:00:01+00:00"),
    pilot("10", "hpc", "RUNNING", "None", "2026-01-01T00:00:00+00:00"),
    pilot("3", "other", "PENDING", "QOSMaxJobsPerUserLimit", ""),
]


def test_running_pilots_come_first_then_pending_ones_by_submission_each_saying_why_it_waits() -> None:
    rows = queue(JOBS, "hpc", [])
    assert [r["jobId"] for r in rows] == ["slurm-10", "slurm-11", "slurm-12"]
    assert [r["summary"] for r in rows] == [
        {"state": "STATE_SCHEDULED", "jobsAhead": 0},
        {"state": "STATE_QUEUED", "jobsAhead": 1},
        {"state": "STATE_QUEUED", "jobsAhead": 2},
    ]
    assert rows[0]["name"] == "Slurm job 10 (pedl pilot agents, partition gpu): RUNNING on n1, 4:00 left"
    assert rows[1]["name"].endswith(": PENDING (Resources)") and rows[2]["name"].endswith("(Priority)")
    assert all(r["type"] == "TYPE_EXTERNAL" and r["resourcePool"] == "hpc" for r in rows)


def test_every_pool_without_a_filter_a_state_filter_and_a_job_squeue_gave_no_time() -> None:
    everything = queue(JOBS, "", [])
    assert len(everything) == 4
    (other,) = [r for r in everything if r["resourcePool"] == "other"]
    assert other["summary"]["jobsAhead"] == 0 and other["submissionTime"].startswith("1970-")
    assert [r["jobId"] for r in queue(JOBS, "", ["STATE_SCHEDULED"])] == ["slurm-10"]
    assert queue(JOBS, "nosuchpool", []) == []


def test_squeues_local_times_become_utc_and_garbage_becomes_empty() -> None:
    converted = utc_time("2026-11-29T01:50:00")
    assert converted.endswith("+00:00") and converted[:4] == "2026"
    assert utc_time("N/A") == "" and utc_time("") == ""


def test_a_trial_on_a_pilot_agent_names_its_slurm_job_and_no_other_agent_does() -> None:
    assert slurm_placement("slurm-42-n3") == {"slurm_job": "42", "agent": "slurm-42-n3"}
    assert slurm_placement("agent-1") == slurm_placement("") == slurm_placement("slurm-x-n1") == {}
