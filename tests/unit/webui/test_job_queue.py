"""Determined's job queue as pedl fills it from its active experiments and the Slurm pools' pilot
jobs (`pedl.jobs`, shaped as Determined's JSON; no server, no Slurm)."""

from __future__ import annotations

from typing import Any

from pedl import jobs
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_scheduler.slurm.commands import utc_time
from pedl_webui.rest.job_queue import job_json
from pedl_webui.rest.shapes import slurm_placement


def pilot(job_id: str, pool: str, state: str, reason: str, submitted: str) -> scheduler_pb2.PilotJob:
    return scheduler_pb2.PilotJob(
        job_id=job_id, resource_pool=pool, partition="gpu", state=state, reason=reason, nodes=1,
        node_list="n1" if state == "RUNNING" else "", time_left="4:00" if state == "RUNNING" else "",
        submit_time=submitted,
    )  # fmt: skip


def queue(
    pilots: list[scheduler_pb2.PilotJob],
    pool: str,
    states: list[str],
    experiments: list[jobs.Job] | None = None,
) -> list[dict[str, Any]]:
    found = [jobs.pilot_job(p) for p in pilots] + (experiments or [])
    return [job_json(j) for j in jobs.in_order(found, pool, [s.removeprefix("STATE_") for s in states])]


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
    both = ["slurm-42-n3", "slurm-42-n4"]
    running = scheduler_pb2.Trial(agent_id="slurm-42-n3", ran_on=both, slurm_job="42")
    ended = scheduler_pb2.Trial(ran_on=["slurm-42-n3"], slurm_job="42")
    assert slurm_placement(running) == slurm_placement(ended) == {"slurm_job": "42", "agent": "slurm-42-n3"}
    assert slurm_placement(scheduler_pb2.Trial(agent_id="agent-1", ran_on=["agent-1"])) == {}
    assert slurm_placement(scheduler_pb2.Trial()) == {}


def _experiment(exp_id: int, created: str, running: int, queued: int) -> jobs.Job:
    trials = [
        scheduler_pb2.Trial(id=i, state=common_pb2.TRIAL_STATE_ACTIVE, agent_id="a1") for i in range(running)
    ]
    trials += [scheduler_pb2.Trial(id=100 + i, state=common_pb2.TRIAL_STATE_ACTIVE) for i in range(queued)]
    trials.append(scheduler_pb2.Trial(id=999, state=common_pb2.TRIAL_STATE_COMPLETED))
    exp = scheduler_pb2.Experiment(id=exp_id, created_at=created, owner="ann", name=f"e{exp_id}")
    return jobs.experiment_job(exp, None, trials)


def test_an_experiment_is_a_job_holding_its_running_trials_slots_of_its_unfinished_ones() -> None:
    busy_job = _experiment(3, "2026-11-29T01:00:00+00:00", running=2, queued=1)
    waiting_job = _experiment(4, "2026-11-29T00:00:00+00:00", running=0, queued=2)
    busy, waiting = job_json(busy_job), job_json(waiting_job)
    assert (busy["jobId"], busy["type"], busy["entityId"], busy["name"]) == (
        "experiment-3",
        "TYPE_EXPERIMENT",
        "3",
        "e3",
    )
    assert (busy["allocatedSlots"], busy["requestedSlots"], busy["summary"]["state"]) == (
        2,
        3,
        "STATE_SCHEDULED",
    )
    assert (waiting["allocatedSlots"], waiting["requestedSlots"], waiting["summary"]["state"]) == (
        0,
        2,
        "STATE_QUEUED",
    )
    # Scheduled ones first, then queued ones by submission, pilot jobs among them; jobsAhead counts per pool.
    pending = pilot("7", "default", "PENDING", "Resources", "2026-11-29T00:30:00+00:00")
    rows = queue([pending], "", [], [waiting_job, busy_job])
    assert [(r["jobId"], r["summary"]["jobsAhead"]) for r in rows] == [
        ("experiment-3", 0),
        ("experiment-4", 1),
        ("slurm-7", 2),
    ]
    assert [r["jobId"] for r in queue([], "", ["STATE_QUEUED"], [waiting_job, busy_job])] == ["experiment-4"]


def test_a_job_id_names_an_experiment_a_pilot_job_is_slurms_and_others_are_unknown() -> None:
    assert jobs.experiment_of("experiment-12") == 12
    for job_id, error in (("slurm-7", ValueError), ("experiment-x", LookupError), ("7", LookupError)):
        try:
            jobs.experiment_of(job_id)
        except error as e:
            assert job_id in str(e)
        else:
            raise AssertionError(job_id)
