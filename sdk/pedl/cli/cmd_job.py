"""`det job list|update`: the cluster's jobs as Determined's job queue shows them (`pedl.jobs`).

pedl serves each pool in weighted fair share, so `update` changes an experiment's weight or
priority (as `det e set weight|priority` does); moving a job in a queue is refused in one line.
"""

from __future__ import annotations

import argparse
import dataclasses

from pedl import jobs
from pedl.cli import output, render
from pedl.cli.client import connect
from pedl.cli.errors import EXIT_BAD_INPUT, CliError
from pedl.v1 import scheduler_pb2


def register(job: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Adds the group's commands to its parser (pedl.cli.main makes the parser, names and help)."""
    commands = job.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = commands.add_parser(
        "list", aliases=["ls"], parents=[common], help="list active experiments and Slurm pilot jobs as jobs"
    )
    listing.add_argument("-p", "--resource-pool", default="", help="only this pool's jobs")
    output.add_format_flags(listing)
    listing.set_defaults(func=list_jobs)
    update = commands.add_parser(
        "update", aliases=["u"], parents=[common], help="change an experiment job's weight or priority"
    )
    update.add_argument("job_id", metavar="JOB_ID", help="experiment-<id>, as `job list` shows it")
    which = update.add_mutually_exclusive_group(required=True)
    which.add_argument("-w", "--weight", type=float, help="the new fair-share weight")
    which.add_argument("-p", "--priority", type=int, help="the new priority (1-99, lower first)")
    which.add_argument("--resource-pool", help="(refused: an experiment's pool is fixed by its config)")
    update.set_defaults(func=update_job)
    batch = commands.add_parser(
        "update-batch", parents=[common], help="several updates: JOB_ID.weight=W or JOB_ID.priority=P"
    )
    batch.add_argument("operation", nargs="+", metavar="OPERATION")
    batch.set_defaults(func=update_batch)


def list_jobs(args: argparse.Namespace) -> int:
    with connect(args) as client:
        found = jobs.in_order(jobs.gather(client.call), args.resource_pool)
    rows = [
        [
            j.jobs_ahead,
            j.job_id,
            j.kind,
            f"{j.name} ({j.entity_id})" if j.kind == jobs.EXPERIMENT else j.name,
            f"{j.weight:g}",
            render.short_time(j.submitted),
            f"{j.allocated_slots}/{j.requested_slots}",
            j.state,
            j.username,
        ]
        for j in found
    ]
    headers = [
        "#",
        "ID",
        "TYPE",
        "JOB NAME",
        "WEIGHT",
        "SUBMITTED",
        "SLOTS (ACQUIRED/NEEDED)",
        "STATE",
        "USER",
    ]
    output.emit(args, [dataclasses.asdict(j) for j in found], render.table(headers, rows))
    return 0


_POOL_FIXED = "an experiment's resource pool is fixed by its config (resources.resource_pool)"


def update_job(args: argparse.Namespace) -> int:
    if args.resource_pool is not None:
        raise CliError(_POOL_FIXED, EXIT_BAD_INPUT)
    field, value = ("weight", args.weight) if args.weight is not None else ("priority", args.priority)
    _apply(args, [_patch(args.job_id, field, str(value))])
    return 0


def update_batch(args: argparse.Namespace) -> int:
    """Every operation is checked before any is made, as Determined's `update-batch` reads them."""
    patches = []
    for op in args.operation:
        job_id, _, rest = op.partition(".")
        field, _, value = rest.partition("=")
        if not job_id or not value or field not in ("weight", "priority", "resource-pool"):
            raise CliError(f"operation {op!r}: write JOB_ID.weight=W or JOB_ID.priority=P", EXIT_BAD_INPUT)
        if field == "resource-pool":
            raise CliError(_POOL_FIXED, EXIT_BAD_INPUT)
        patches.append(_patch(job_id, field, value))
    _apply(args, patches)
    return 0


def _patch(job_id: str, field: str, value: str) -> scheduler_pb2.PatchExperimentRequest:
    try:
        patch = scheduler_pb2.PatchExperimentRequest(experiment_id=jobs.experiment_of(job_id))
    except (ValueError, LookupError) as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from None
    try:
        if field == "weight":
            patch.weight = float(value)
        else:
            patch.priority = int(value)
    except ValueError:
        raise CliError(f"job {job_id}: {field} must be a number, not {value!r}", EXIT_BAD_INPUT) from None
    return patch


def _apply(args: argparse.Namespace, patches: list[scheduler_pb2.PatchExperimentRequest]) -> None:
    with connect(args) as client:
        for patch in patches:
            client.patch_experiment(patch)
            what = f"weight {patch.weight:g}" if patch.HasField("weight") else f"priority {patch.priority}"
            print(f"Job experiment-{patch.experiment_id}: {what}")
