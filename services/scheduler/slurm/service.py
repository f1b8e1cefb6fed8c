"""The scheduler's side of Slurm pools: each poll, squeue the pool's pilot jobs, plan, sbatch/scancel.

Thin on purpose: what to submit or cancel is `plan.plan`'s pure decision; Slurm's clients run in a
thread so the scheduler's event loop never waits on them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import structlog

from pedl.v1 import scheduler_pb2
from pedl_scheduler.slurm import commands
from pedl_scheduler.slurm.commands import ListedJob, Pilot, SlurmError
from pedl_scheduler.slurm.options import SlurmPool, SlurmSettings
from pedl_scheduler.slurm.plan import Demand, JobShape, PilotJob, Plan, plan

if TYPE_CHECKING:
    from pedl_scheduler.experiments import ExperimentManager

WAITING_PREFIX = "waiting for Slurm"


def experiment_shape(pool: SlurmPool, settings: SlurmSettings, slurm: dict[str, Any] | None) -> JobShape:
    """A node's shape for one experiment: its `slurm:` section over the scheduler's defaults."""
    slurm = slurm or {}
    return JobShape(
        slots_per_node=int(slurm.get("slots_per_node") or settings.slots_per_node),
        gpu=pool.gpu,
        gpu_type=str(slurm.get("gpu_type") or ""),
        sbatch_args=tuple(str(a) for a in slurm.get("sbatch_args") or ()),
    )


@dataclass
class PoolState:
    """What one pool's service remembers: the shape of each job it submitted, what Slurm says of them."""

    pilot: Pilot
    pool: SlurmPool
    shapes: dict[str, JobShape] = field(default_factory=dict)
    listed: list[ListedJob] = field(default_factory=list)
    error: str = ""


class SlurmPools:
    def __init__(self, manager: ExperimentManager, settings: SlurmSettings, master: str) -> None:
        self.manager = manager
        self.settings = settings
        self.log = structlog.get_logger(component="slurm")
        settings.output_dir.mkdir(parents=True, exist_ok=True)
        self.pools = {
            p.name: PoolState(
                Pilot(
                    p.name,
                    p.partition,
                    settings.master or master,
                    settings.agent_command,
                    settings.exit_when_idle_s,
                    settings.cpus_per_slot,
                    str(settings.output_dir),
                    settings.signal_s,
                ),
                p,
            )
            for p in settings.pools
        }

    async def run_forever(self) -> None:
        while True:
            for state in self.pools.values():
                try:
                    await self.step(state)
                    state.error = ""
                except SlurmError as e:
                    if str(e) != state.error:
                        self.log.warning("slurm pool", pool=state.pool.name, error=str(e))
                    state.error = str(e)
                except Exception:
                    self.log.exception("slurm pool step failed", pool=state.pool.name)
            await asyncio.sleep(self.settings.poll_s)

    async def step(self, state: PoolState) -> None:
        state.listed = await asyncio.to_thread(commands.list_jobs, state.pilot)
        decided = plan(self.demand(state), self.jobs(state), self.settings.max_jobs)
        await self.act(state, decided)
        self.show_waiting(state, decided)
        self.manager.state.cluster.pilot_jobs = self.listing()

    def listing(self) -> list[scheduler_pb2.PilotJob]:
        """Every pool's pilot jobs, pending ones with Slurm's reason: `pedl agent list`, the web UI."""
        return [
            scheduler_pb2.PilotJob(
                job_id=j.job_id,
                resource_pool=name,
                partition=s.pool.partition,
                state=j.state,
                reason=j.reason,
                nodes=j.nodes,
                time_left=j.time_left,
                node_list=j.node_list,
                submit_time=j.submitted,
            )
            for name, s in self.pools.items()
            for j in s.listed
        ]

    def demand(self, state: PoolState) -> list[Demand]:
        experiments = self.manager.state.experiments
        out = []
        for q in self.manager.scheduling.cluster_state().queued:
            if q.resource_pool != state.pool.name or q.experiment_id not in experiments:
                continue
            raw = experiments[q.experiment_id].config.raw
            out.append(
                Demand(q.trial_id, q.slots, experiment_shape(state.pool, self.settings, raw.get("slurm")))
            )
        return out

    def jobs(self, state: PoolState) -> list[PilotJob]:
        free: dict[str, list[int]] = {}
        for agent in self.manager.state.cluster.agents.values():
            job = commands.job_of_agent(agent.id)
            if job is not None:
                free.setdefault(job, []).append(len(agent.free_slots()))
        return [
            PilotJob(
                j.job_id,
                state.shapes.get(j.job_id),
                j.nodes,
                j.state,
                j.reason,
                tuple(free.get(j.job_id, ())),
            )
            for j in state.listed
        ]

    async def act(self, state: PoolState, decided: Plan) -> None:
        if decided.cancel:
            self.log.info(
                "cancelling pilot jobs no trial needs", pool=state.pool.name, jobs=list(decided.cancel)
            )
            await asyncio.to_thread(commands.cancel, list(decided.cancel))
            # Gone from the listing at once, not at the next poll: `det job list` right after a kill
            # must not show a job pedl just cancelled (the full run saw it there).
            cancelled = set(decided.cancel)
            state.listed = [j for j in state.listed if j.job_id not in cancelled]
        for request in decided.submit:
            job_id = await asyncio.to_thread(commands.submit, state.pilot, request)
            state.shapes[job_id] = request.shape
            now = datetime.now(timezone.utc).isoformat()
            state.listed.append(ListedJob(job_id, "PENDING", "submitted", request.nodes, "", "", now))
            self.log.info("pilot job submitted", pool=state.pool.name, job=job_id, nodes=request.nodes)

    def show_waiting(self, state: PoolState, decided: Plan) -> None:
        """Each queued trial's describe says which job it waits for and Slurm's reason."""
        listed = {j.job_id: j for j in state.listed}
        trials = self.manager.state.trials
        for trial_id, job_id in decided.waits_on.items():
            trial = trials.get(trial_id)
            if trial is None or (
                trial.waiting_reason and not trial.waiting_reason.startswith(WAITING_PREFIX)
            ):
                continue
            job = listed.get(job_id or "")
            if job is None:
                trial.waiting_reason = (
                    f"{WAITING_PREFIX}: a pilot job in partition {state.pool.partition} is being submitted"
                )
            elif job.state == "PENDING":
                partition = state.pool.partition
                trial.waiting_reason = (
                    f"{WAITING_PREFIX} job {job.job_id} in partition {partition}: pending ({job.reason})"
                )
            else:
                trial.waiting_reason = (
                    f"{WAITING_PREFIX} job {job.job_id}: {job.state.lower()}, its agents are starting"
                )
