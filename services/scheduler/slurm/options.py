"""`pedl-scheduler`'s Slurm flags, parsed once into typed pools."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path

KINDS = {"slurm": False, "slurm-gpu": True}  # kind -> slots are GPUs


@dataclass(frozen=True)
class SlurmPool:
    name: str
    partition: str
    gpu: bool


@dataclass(frozen=True)
class SlurmSettings:
    pools: tuple[SlurmPool, ...]
    agent_command: tuple[str, ...]
    master: str  # "" : the scheduler's own host:port
    slots_per_node: int
    cpus_per_slot: int
    max_jobs: int
    exit_when_idle_s: float
    poll_s: float
    signal_s: int
    output_dir: Path


def parse_pool(text: str) -> SlurmPool:
    """NAME=slurm:PARTITION (CPU slots) or NAME=slurm-gpu:PARTITION (GPU slots)."""
    name, eq, rest = text.partition("=")
    kind, colon, partition = rest.partition(":")
    if not (eq and colon and name.strip() and partition.strip()) or kind not in KINDS:
        raise ValueError(
            f"--resource-pool {text!r}: expected NAME=slurm:PARTITION or NAME=slurm-gpu:PARTITION"
        )
    return SlurmPool(name.strip(), partition.strip(), KINDS[kind])


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Slurm pools (docs/DEPLOY.md, 'pedl on a Slurm cluster')")
    g.add_argument(
        "--resource-pool",
        action="append",
        default=[],
        metavar="NAME=slurm:PARTITION",
        help="a resource pool whose agents are Slurm pilot jobs in PARTITION, submitted as its trials queue "
        "(slurm-gpu:PARTITION: slots are GPUs, --gres=gpu:N); repeatable",
    )
    g.add_argument(
        "--slurm-agent-command",
        default="pedl-agent",
        help="the command a pilot job runs on each node, with the agent flags it needs there (e.g. "
        "'/shared/venv/bin/pedl-agent --cluster-secret-file /shared/secret'); the scheduler adds --master, "
        "--resource-pool, --agent-id, --slots and --exit-when-idle",
    )
    g.add_argument(
        "--slurm-master",
        default="",
        help="HOST:PORT pilot agents reach this scheduler on (default: --host:--port)",
    )
    g.add_argument(
        "--slurm-slots-per-node", type=int, default=1, help="slots a pilot offers per node (default 1)"
    )
    g.add_argument("--slurm-cpus-per-slot", type=int, default=1, help="CPUs asked per CPU slot (default 1)")
    g.add_argument("--slurm-max-jobs", type=int, default=8, help="most pilot jobs live per pool (default 8)")
    g.add_argument(
        "--slurm-exit-when-idle",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a pilot agent without trials this long exits, ending its job (default 60)",
    )
    g.add_argument(
        "--slurm-poll", type=float, default=3.0, metavar="SECONDS", help="squeue interval (default 3)"
    )
    g.add_argument(
        "--slurm-signal-seconds",
        type=int,
        default=120,
        metavar="SECONDS",
        help="sbatch --signal=B:USR1@SECONDS: pilots stop this long before their walltime ends (default 120)",
    )
    g.add_argument(
        "--slurm-output-dir",
        default=str(Path("~/.pedl/slurm").expanduser()),
        help="where pilot jobs write their output (a path the compute nodes can write)",
    )


def from_args(args: argparse.Namespace) -> SlurmSettings:
    """ValueError with one line naming the flag."""
    pools = tuple(parse_pool(t) for t in args.resource_pool)
    if len({p.name for p in pools}) != len(pools):
        raise ValueError("--resource-pool: a pool name is given twice")
    for flag in ("slurm_slots_per_node", "slurm_cpus_per_slot", "slurm_max_jobs"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    if not args.slurm_poll > 0 or args.slurm_exit_when_idle < 0 or args.slurm_signal_seconds < 0:
        raise ValueError("--slurm-poll must be > 0, --slurm-exit-when-idle and --slurm-signal-seconds >= 0")
    command = tuple(shlex.split(args.slurm_agent_command))
    if not command:
        raise ValueError("--slurm-agent-command is empty")
    return SlurmSettings(
        pools,
        command,
        args.slurm_master,
        args.slurm_slots_per_node,
        args.slurm_cpus_per_slot,
        args.slurm_max_jobs,
        args.slurm_exit_when_idle,
        args.slurm_poll,
        args.slurm_signal_seconds,
        Path(args.slurm_output_dir),
    )
