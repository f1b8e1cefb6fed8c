"""Slurm's own clients (`sbatch`, `squeue`, `scancel`), run as subprocesses; and the pilot job's script.

The scheduler talks to Slurm only through these commands, as a user on a login node would, so it
needs no Slurm library, no slurmrestd and no privileges; SLURM_CONF in its environment chooses the
cluster as for any Slurm client.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone

from pedl_scheduler.slurm.plan import JobShape, Request

TIMEOUT_S = 30.0
_FIELDS = "%i|%T|%r|%D|%L|%N|%V"


class SlurmError(RuntimeError):
    """A Slurm client failed; the message is its own one line."""


@dataclass(frozen=True)
class ListedJob:
    job_id: str
    state: str
    reason: str
    nodes: int
    time_left: str
    node_list: str
    # RFC 3339 in UTC ("" when squeue gave none).
    submitted: str = ""


@dataclass(frozen=True)
class Pilot:
    """What every pilot job of a pool runs: the agent command and where the agents reach the scheduler."""

    pool: str
    partition: str
    master: str
    agent_command: tuple[str, ...]
    exit_when_idle_s: float
    cpus_per_slot: int
    output_dir: str
    signal_s: int

    @property
    def job_name(self) -> str:
        return f"pedl-{self.pool}"


def _run(argv: list[str], stdin: str | None = None) -> str:
    try:
        out = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SlurmError(f"{argv[0]}: {e}") from None
    if out.returncode != 0:
        message = (out.stderr or out.stdout).strip().splitlines()
        raise SlurmError(f"{argv[0]} failed: {message[-1] if message else f'exit {out.returncode}'}")
    return out.stdout


def sbatch_argv(pilot: Pilot, request: Request) -> list[str]:
    """`sbatch` with the job's size; the experiment's `slurm.sbatch_args` come last, so they win."""
    shape = request.shape
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={pilot.job_name}",
        f"--partition={pilot.partition}",
        f"--nodes={request.nodes}",
        "--ntasks-per-node=1",
        f"--output={pilot.output_dir}/%x-%j.out",
        # Before a walltime end (or a QOS preemption that grants a grace time) the batch shell gets
        # USR1; the script passes USR2 to the agents, which drain (pedl_agent.drain): their trials
        # checkpoint and stop, and resume in another pilot job without spending a restart.
        f"--signal=B:USR1@{pilot.signal_s}",
    ]
    if shape.gpu:
        gres = (
            f"gpu:{shape.gpu_type}:{shape.slots_per_node}"
            if shape.gpu_type
            else f"gpu:{shape.slots_per_node}"
        )
        argv.append(f"--gres={gres}")
    else:
        argv.append(f"--cpus-per-task={shape.slots_per_node * pilot.cpus_per_slot}")
    return [*argv, *shape.sbatch_args]


def batch_script(pilot: Pilot, shape: JobShape) -> str:
    """One agent per node (`srun`), named after the job and node so the scheduler knows whose it is."""
    agent = [
        *pilot.agent_command,
        "--master",
        pilot.master,
        "--resource-pool",
        pilot.pool,
        "--exit-when-idle",
        f"{pilot.exit_when_idle_s:g}",
    ]
    if not shape.gpu:
        agent += ["--slots", str(shape.slots_per_node)]
    command = " ".join(shlex.quote(a) for a in agent)
    inner = f'exec {command} --agent-id "{AGENT_PREFIX}$SLURM_JOB_ID-$SLURMD_NODENAME"'
    return (
        "#!/bin/bash\n"
        "# pedl pilot job: one pedl-agent per node, for this job's life.\n"
        f"srun --ntasks-per-node=1 --kill-on-bad-exit=0 bash -c {shlex.quote(inner)} &\n"
        "step=$!\n"
        # USR1 (--signal, before the walltime): each node's agent, and only it (a signal to the step
        # would reach the trials' processes too), gets USR2 and drains. TERM (scancel): stop now.
        f"trap {shlex.quote(DRAIN)} USR1\n"
        "trap 'kill -TERM $step' TERM\n"
        # `wait` returns when a trapped signal arrives; the agents are still leaving then.
        "while kill -0 $step 2>/dev/null; do wait $step; done\n"
    )


AGENT_PREFIX = "slurm-"
# A step beside the agents' (--overlap) on each node signals the agent whose --agent-id is of this
# job; "[s]lurm" matches the agent's command line but not this one's own.
DRAIN = (
    'srun --overlap --ntasks-per-node=1 --kill-on-bad-exit=0 pkill -USR2 -f -- "--agent-id [s]'
    + AGENT_PREFIX[1:]
    + '$SLURM_JOB_ID-"'
)


def job_of_agent(agent_id: str) -> str | None:
    """The Slurm job a pilot agent runs in (None for other agents)."""
    if not agent_id.startswith(AGENT_PREFIX):
        return None
    job, _, _ = agent_id[len(AGENT_PREFIX) :].partition("-")
    return job or None


def submit(pilot: Pilot, request: Request) -> str:
    """The new job's id."""
    out = _run(sbatch_argv(pilot, request), stdin=batch_script(pilot, request.shape))
    return out.strip().split(";")[0]


def list_jobs(pilot: Pilot) -> list[ListedJob]:
    out = _run(["squeue", "--noheader", f"--name={pilot.job_name}", f"--format={_FIELDS}"])
    jobs = []
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) != 7:
            continue
        job_id, state, reason, nodes, left, node_list, submitted = parts
        count = int(nodes) if nodes.isdigit() else 1
        jobs.append(ListedJob(job_id, state, reason, count, left, node_list, utc_time(submitted)))
    return jobs


def utc_time(local: str) -> str:
    """squeue prints times in the machine's local zone without saying so; "" when it printed none."""
    try:
        return datetime.fromisoformat(local).astimezone(timezone.utc).isoformat()
    except ValueError:
        return ""


def cancel(job_ids: list[str]) -> None:
    if job_ids:
        _run(["scancel", *job_ids])
