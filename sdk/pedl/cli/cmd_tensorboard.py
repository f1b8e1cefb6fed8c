"""`pedl tensorboard EXPERIMENT_ID...`: TensorBoard over the metrics the scheduler stores and the
event files trials wrote themselves.

The metric event files are written here from GetExperiment/GetTrial (trials run on other machines,
their metrics live in the scheduler); the trials' own event files are downloaded from the checkpoint
store (`exp-<id>/trial-<id>/files/`). Then `tensorboard --logdir` serves them, and both are refreshed
every few seconds while any experiment is still live.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import grpc

from pedl.checkpoints import CheckpointError, CheckpointStoreClient
from pedl.cli.arguments import port, positive_int
from pedl.cli.client import connect
from pedl.cli.cmd_checkpoint import store_address
from pedl.cli.errors import EXIT_BAD_INPUT, CliError

if TYPE_CHECKING:
    from pedl.tensorboard import MetricsSync
    from pedl.tensorboard.files_sync import TrialFilesSync

DEFAULT_PORT = 6006


def register(command: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Adds the group's commands to its parser (pedl.cli.main makes the parser, names and help)."""
    command.add_argument("experiment_ids", type=positive_int, nargs="*", metavar="EXPERIMENT_ID")
    command.add_argument(
        "-t",
        "--trial-ids",
        type=positive_int,
        nargs="+",
        default=[],
        metavar="TRIAL_ID",
        help="trials to show (besides whole experiments)",
    )
    command.add_argument(
        "--port",
        type=port,
        default=DEFAULT_PORT,
        help=f"TensorBoard's port (default {DEFAULT_PORT}; 0 picks one)",
    )
    command.add_argument(
        "--host", default="127.0.0.1", help="address TensorBoard listens on (default 127.0.0.1)"
    )
    command.add_argument(
        "--logdir",
        type=Path,
        help="where to write the event files (default: a temporary directory, removed after)",
    )
    command.add_argument(
        "--refresh", type=float, default=5.0, help="seconds between metric refreshes of live experiments"
    )
    command.set_defaults(func=tensorboard)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def tensorboard(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("tensorboard") is None:
        raise CliError("TensorBoard is not installed: pip install tensorboard", EXIT_BAD_INPUT)
    if not args.experiment_ids and not args.trial_ids:
        raise CliError("name at least one EXPERIMENT_ID or --trial-ids TRIAL_ID", EXIT_BAD_INPUT)
    if args.refresh <= 0:
        raise CliError(f"--refresh must be a positive number of seconds, got {args.refresh}", EXIT_BAD_INPUT)
    from pedl.tensorboard import MetricsSync

    owned = args.logdir is None
    logdir = Path(tempfile.mkdtemp(prefix="pedl-tensorboard-")) if owned else args.logdir.expanduser()
    if logdir.exists() and not logdir.is_dir():
        raise CliError(f"--logdir {logdir} is not a directory", EXIT_BAD_INPUT)
    logdir.mkdir(parents=True, exist_ok=True)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # `kill PID` stops TensorBoard too
    process: subprocess.Popen | None = None
    try:
        with connect(args) as client, _store(args) as store:
            experiment_ids, only_trials = _chosen(client, args.experiment_ids, args.trial_ids)
            sync = MetricsSync(client, logdir, experiment_ids, only_trials)
            files = _files_sync(store, logdir, experiment_ids, only_trials)
            try:
                done = sync.refresh()
                _refresh_files(files)
                bound = args.port or _free_port(args.host)
                process = subprocess.Popen(
                    [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir)]
                    + ["--host", args.host, "--port", str(bound), "--reload_interval", str(args.refresh)]
                )
                print(
                    f"TensorBoard at http://{args.host}:{bound}/ (event files in {logdir}); Ctrl-C stops it"
                )
                sys.stdout.flush()
                return _watch(process, sync, files, args.refresh, done)
            finally:
                sync.close()
    finally:
        if process is not None:
            _stop(process)
        signal.signal(signal.SIGTERM, previous)
        if owned:
            shutil.rmtree(logdir, ignore_errors=True)


def _store(args: argparse.Namespace) -> contextlib.AbstractContextManager[CheckpointStoreClient | None]:
    """The checkpoint store the trials' own event files are in; None (with a warning) where it is
    unknown: the metric runs are shown all the same."""
    if not hasattr(args, "checkpoint_store"):
        args.checkpoint_store = None
    try:
        return CheckpointStoreClient(store_address(args))
    except (CliError, grpc.RpcError) as e:
        print(f"warning: trials' own TensorBoard files not shown: {e}", file=sys.stderr)
        return contextlib.nullcontext()


def _chosen(
    client: Any, experiment_ids: list[int], trial_ids: list[int]
) -> tuple[list[int], dict[int, set[int]]]:
    """The experiments to show, and for those named only through trials, which of their trials."""
    only: dict[int, set[int]] = {}
    for trial_id in trial_ids:
        exp_id = client.get_trial(trial_id).trial.experiment_id
        if exp_id not in experiment_ids:
            only.setdefault(exp_id, set()).add(trial_id)
    return list(dict.fromkeys([*experiment_ids, *only])), only


def _files_sync(
    store: CheckpointStoreClient | None, logdir: Path, experiment_ids: list[int], only: dict[int, set[int]]
) -> TrialFilesSync | None:
    from pedl.tensorboard.files_sync import TrialFilesSync

    return None if store is None else TrialFilesSync(store, logdir, experiment_ids, only)


def _refresh_files(files: TrialFilesSync | None) -> bool:
    """False (with a warning) when the store could not be read this time."""
    if files is None:
        return True
    try:
        files.refresh()
    except CheckpointError as e:
        print(f"warning: cannot refresh the trials' own TensorBoard files: {e}", file=sys.stderr)
        return False
    return True


def _watch(
    process: subprocess.Popen, sync: MetricsSync, files: TrialFilesSync | None, refresh: float, done: bool
) -> int:
    """Refreshes the event files until every experiment has ended; returns when TensorBoard exits."""
    warned = False
    while True:
        try:
            code = process.wait(timeout=refresh)
        except subprocess.TimeoutExpired:
            if done:
                continue
            try:
                done = sync.refresh()
                warned = False
                _refresh_files(files)  # after the states were read: an ended trial's files are all stored
            except grpc.RpcError as e:
                if not warned:  # the scheduler may be restarting: keep serving what is written
                    print(f"warning: cannot refresh metrics: {e}", file=sys.stderr)
                    warned = True
            continue
        if code != 0:
            raise CliError(f"TensorBoard exited with status {code}")
        return 0


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
