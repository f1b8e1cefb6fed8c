"""`pedl checkpoint list|describe|download|delete|rm`: listings come from the scheduler, bytes from
the store."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pedl import _grpc, records
from pedl._metrics import from_struct
from pedl.checkpoints import CheckpointError, CheckpointNotFound, CheckpointStoreClient
from pedl.cli import output, render, transfer_bar
from pedl.cli.arguments import positive_int
from pedl.cli.client import connect, resolve_master
from pedl.cli.errors import EXIT_BAD_INPUT, CliError
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc

_UUID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_.-]*$")
_INFO_TIMEOUT = 30.0


def register(group: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Adds the group's commands to its parser (pedl.cli.main makes the parser, names and help)."""
    commands = group.add_subparsers(dest="command", required=True, metavar="COMMAND")

    list_ = commands.add_parser("list", parents=[common], help="list an experiment's checkpoints")
    list_.add_argument("experiment_id", type=positive_int, metavar="EXPERIMENT_ID")
    output.add_format_flags(list_)
    list_.set_defaults(func=list_checkpoints)

    describe = commands.add_parser(
        "describe", parents=[common], help="show a checkpoint: its trial, validation, files and metadata"
    )
    describe.add_argument("uuid", type=checkpoint_uuid, metavar="UUID")
    _store_argument(describe)
    output.add_format_flags(describe)
    describe.set_defaults(func=describe_checkpoint)

    download = commands.add_parser("download", parents=[common], help="write a checkpoint's files")
    download.add_argument("uuid", type=checkpoint_uuid, metavar="UUID")
    download.add_argument(
        "-o", "--output-dir", metavar="DIR", help="empty or absent directory (default: ./checkpoints/UUID)"
    )
    _store_argument(download)
    download.set_defaults(func=download_checkpoint)

    delete = commands.add_parser(
        "delete",
        parents=[common],
        help="delete checkpoints (owner or admin); refused while a trial still needs one",
    )
    delete.add_argument("uuids", type=checkpoint_uuids, metavar="UUID[,UUID...]")
    delete.set_defaults(func=delete_checkpoint)

    rm = commands.add_parser(
        "rm", parents=[common], help="remove the files matching globs from checkpoints (owner or admin)"
    )
    rm.add_argument("uuids", type=checkpoint_uuids, metavar="UUID[,UUID...]")
    rm.add_argument(
        "--glob",
        action="append",
        default=[],
        help="files to remove (repeatable): * ? [...] within a path segment, ** across; none: remove nothing",
    )
    rm.add_argument("--yes", action="store_true", help="accepted for Determined's spelling; nothing is asked")
    rm.set_defaults(func=remove_checkpoint_files)


def checkpoint_uuid(text: str) -> str:
    """Refuses what cannot be a uuid early, so a typo never reaches the store as a path."""
    value = text.strip()
    if not _UUID.match(value):
        raise argparse.ArgumentTypeError(f"expected a checkpoint UUID, got {text!r}")
    return value


def checkpoint_uuids(text: str) -> list[str]:
    """Comma-separated uuids, as Determined's `det checkpoint delete` takes them."""
    return [checkpoint_uuid(part) for part in text.split(",")]


def _store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint-store",
        metavar="HOST:PORT",
        help="checkpoint store address (default: the one the scheduler names)",
    )


def store_address(args: argparse.Namespace) -> str:
    """--checkpoint-store, else the address the scheduler's GetClusterInfo reports."""
    if args.checkpoint_store:
        return str(args.checkpoint_store)
    args.master_address = resolve_master(getattr(args, "master", None))
    channel = _grpc.channel(args.master_address)
    try:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        info = stub.GetClusterInfo(scheduler_pb2.GetClusterInfoRequest(), timeout=_INFO_TIMEOUT)
    finally:
        channel.close()
    if not info.checkpoint_store_address:
        raise CliError(f"the scheduler at {args.master_address} names no checkpoint store")
    return str(info.checkpoint_store_address)


def list_checkpoints(args: argparse.Namespace) -> int:
    with connect(args) as client:
        response = client.get_experiment(args.experiment_id)
        details = client.trial_details(args.experiment_id, include_steps=False)
    metric = response.experiment.searcher_metric
    rows = []
    for detail in sorted(details, key=lambda d: d.trial.id):
        validations = {v.total_batches: from_struct(v.metrics) for v in detail.validations}
        for c in sorted(detail.checkpoints, key=lambda c: (c.total_batches, c.uuid)):
            rows.append(
                records.checkpoint_record(c, metric, validations.get(c.total_batches, {}).get(metric))
            )
    if not rows:
        text = f"Experiment {args.experiment_id} has no checkpoints."
    else:
        text = render.experiment_checkpoints_table(details, metric)
    output.emit(args, rows, text)
    return 0


def describe_checkpoint(args: argparse.Namespace) -> int:
    """The store's record (files, sizes, metadata) with the validation the scheduler holds at its batch."""
    address = store_address(args)
    try:
        with CheckpointStoreClient(address) as store:
            checkpoint = store.get(args.uuid)
    except CheckpointNotFound:
        raise CliError(f"checkpoint {args.uuid} not found in the checkpoint store at {address}") from None
    except CheckpointError as e:
        raise CliError(str(e)) from None
    with connect(args) as client:
        detail = client.get_trial(checkpoint.trial_id)
        metric = client.get_experiment(checkpoint.experiment_id).experiment.searcher_metric
    validation = next(
        (from_struct(v.metrics) for v in detail.validations if v.total_batches == checkpoint.total_batches),
        {},
    )
    record = records.checkpoint_record(checkpoint, metric, validation.get(metric))
    record["experiment_id"] = checkpoint.experiment_id
    record["validation_metrics"] = validation
    record["metadata"] = dict(checkpoint.metadata)
    record["files"] = [{"path": f.path, "size_bytes": f.size} for f in checkpoint.files]
    output.emit(
        args,
        record,
        render.describe_checkpoint(checkpoint, validation),
        csv_rows=[{k: v for k, v in record.items() if not isinstance(v, (list, dict))}],
    )
    return 0


def download_checkpoint(args: argparse.Namespace) -> int:
    output = Path(args.output_dir) if args.output_dir else Path("checkpoints") / args.uuid
    fetch_checkpoint(args, args.uuid, output)
    return 0


def fetch_checkpoint(args: argparse.Namespace, uuid: str, output: Path) -> None:
    """Downloads one checkpoint into an empty or absent directory and says so (shared by
    `checkpoint download`, `e download` and `t download`)."""
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise CliError(f"output directory {output} exists and is not an empty directory", EXIT_BAD_INPUT)
    if not hasattr(args, "checkpoint_store"):
        args.checkpoint_store = None
    address = store_address(args)
    try:
        with CheckpointStoreClient(address) as store:
            if transfer_bar.enabled():
                record = store.get(uuid)
                total = record.total_size or sum(f.size for f in record.files)
                with transfer_bar.download(f"checkpoint {uuid}", output, total):
                    checkpoint = store.download(uuid, output)
            else:
                checkpoint = store.download(uuid, output)
    except CheckpointNotFound:
        raise CliError(f"checkpoint {uuid} not found in the checkpoint store at {address}") from None
    except CheckpointError as e:
        raise CliError(str(e)) from None
    size = render.human_bytes(checkpoint.total_size or sum(f.size for f in checkpoint.files))
    print(
        f"Downloaded checkpoint {uuid} (trial {checkpoint.trial_id}, "
        f"batches {checkpoint.total_batches}, {len(checkpoint.files)} files, {size}) to {output}"
    )


def delete_checkpoint(args: argparse.Namespace) -> int:
    """Through the scheduler, which owns checkpoints' lifecycle: it checks the owner, refuses one a
    trial still needs, and deletes the bytes through the store (users cannot delete at the store)."""
    with connect(args) as client:
        deleted = client.delete_checkpoints(args.uuids)
    for c in deleted:
        print(f"Deleted checkpoint {c.uuid} (trial {c.trial_id}, batches {c.total_batches})")
    return 0


def remove_checkpoint_files(args: argparse.Namespace) -> int:
    """Through the scheduler, as deletes: each checkpoint becomes PARTIALLY_DELETED, or DELETED once
    no file is left."""
    with connect(args) as client:
        now = client.remove_checkpoint_files(args.uuids, args.glob)
    for c in now:
        state = records.checkpoint_state(c.state)
        print(f"Checkpoint {c.uuid}: {state}, {len(c.files)} files ({c.total_size} bytes) left")
    return 0
