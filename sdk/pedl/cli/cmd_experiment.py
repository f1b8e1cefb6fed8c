"""`pedl experiment ...`: create (validating config and context locally first), list, kill/cancel,
pause, activate, wait and download-model-def; the read-only views are in cmd_experiment_views."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pedl import records
from pedl.cli import cmd_experiment_edit as edit
from pedl.cli import cmd_experiment_logs as experiment_logs
from pedl.cli import cmd_experiment_views as views
from pedl.cli import cmd_refused, output, progress, render, transfer_bar
from pedl.cli.arguments import positive_int
from pedl.cli.client import SchedulerClient, connect
from pedl.cli.errors import EXIT_BAD_INPUT, CliError
from pedl.cli.search_view import LiveOutput, SearchView, live_wanted

# Seconds between polls for --follow and wait; tests set it to 0.
POLL_SECONDS = 1.0
# --follow fetches this many changed trials one by one; more come in one ListTrialDetails call.
_BATCH_FROM = 3


def register(group: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Adds the group's commands to its parser (pedl.cli.main makes the parser, names and help)."""
    commands = group.add_subparsers(dest="command", metavar="COMMAND")
    group.set_defaults(func=list_experiments)  # `det e` alone lists, as Determined's does

    create = commands.add_parser("create", parents=[common], help="create an experiment")
    create.add_argument("config_file", metavar="CONFIG", help="experiment configuration (YAML)")
    create.add_argument(
        "context_dir", metavar="CONTEXT_DIR", help="directory (or .py file) of the model definition"
    )
    create.add_argument(
        "-f", "--follow", action="store_true", help="print progress until the experiment ends"
    )
    create.add_argument(
        "-t",
        "--test-mode",
        "--test",
        dest="test",
        action="store_true",
        help="run the minimal loop (a few batches, a validation, a checkpoint) instead of the search",
    )
    create.add_argument(
        "--local", action="store_true", help="run the experiment in this process instead of on the cluster"
    )
    create.add_argument(
        "--config",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field by its dotted path, the value read as YAML (repeatable)",
    )
    create.add_argument(
        "--paused", action="store_true", help="create it paused: no trial starts until `det e activate`"
    )
    create.add_argument(
        "--follow-first-trial",
        action="store_true",
        help="print the first trial's log until it ends (exit 1 unless it completes)",
    )
    create.set_defaults(func=create_experiment)

    list_ = commands.add_parser("list", aliases=["ls"], parents=[common], help="list experiments")
    list_.add_argument("-a", "--all", action="store_true", help="archived experiments too")
    output.add_format_flags(list_)
    list_.set_defaults(func=list_experiments)

    views.register(commands, common)
    edit.register(commands, common)
    experiment_logs.register(commands, common)
    cmd_refused.register_verbs("experiment", commands, common)

    show_config = commands.add_parser(
        "config", parents=[common], help="print an experiment's effective config (create accepts it again)"
    )
    show_config.add_argument("experiment_id", type=positive_int, metavar="ID")
    show_config.set_defaults(func=print_experiment_config)

    for verb in ("kill", "cancel"):
        kill = commands.add_parser(verb, parents=[common], help="stop an experiment and all its trials")
        kill.add_argument("experiment_id", type=positive_int, metavar="ID")
        kill.set_defaults(func=kill_experiment)

    pause = commands.add_parser(
        "pause", parents=[common], help="checkpoint the running trials and release their slots"
    )
    pause.add_argument("experiment_id", type=positive_int, metavar="ID")
    pause.set_defaults(func=pause_experiment)

    activate = commands.add_parser(
        "activate",
        parents=[common],
        help="resume a paused experiment, or revive one the infrastructure ended in ERROR",
    )
    activate.add_argument("experiment_id", type=positive_int, metavar="ID")
    activate.set_defaults(func=activate_experiment)

    wait = commands.add_parser("wait", parents=[common], help="block until an experiment ends")
    wait.add_argument("experiment_id", type=positive_int, metavar="ID")
    wait.set_defaults(func=wait_experiment)

    download = commands.add_parser(
        "download-model-def", parents=[common], help="write an experiment's model definition files"
    )
    download.add_argument("experiment_id", type=positive_int, metavar="ID")
    download.add_argument("-o", "--output-dir", required=True, metavar="DIR", help="directory to write into")
    download.set_defaults(func=download_model_def)


def config_error_message(filename: str, error: Any) -> str:
    """`<file>, line N: <path>: <message>`, leaving out what the error does not know."""
    where = filename + (f", line {error.line}" if getattr(error, "line", None) else "")
    path = getattr(error, "path", None)
    message = getattr(error, "message", None) or str(error)
    return f"{where}: {path}: {message}" if path else f"{where}: {message}"


def _read_config(filename: str) -> str:
    try:
        return Path(filename).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"config file {filename} does not exist", EXIT_BAD_INPUT) from None
    except IsADirectoryError:
        raise CliError(
            f"config file {filename} is a directory, expected a YAML file", EXIT_BAD_INPUT
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read config file {filename}: {e}", EXIT_BAD_INPUT) from None


def create_experiment(args: argparse.Namespace) -> int:
    config_yaml = _read_config(args.config_file)
    from pedl.config import ConfigError, parse_experiment_config

    if args.overrides:
        from pedl.cli.config_overrides import OverrideError, apply_overrides

        try:
            config_yaml = apply_overrides(config_yaml, args.overrides)
        except OverrideError as e:
            raise CliError(str(e), EXIT_BAD_INPUT) from None
    from pedl.config.test_mode import test_mode_config

    try:
        config = parse_experiment_config(config_yaml, filename=args.config_file)
    except ConfigError as e:
        raise CliError(config_error_message(args.config_file, e), EXIT_BAD_INPUT) from None
    for warning in config.warnings:
        print(f"warning: {args.config_file}: {warning}", file=sys.stderr)
    if args.test:
        config = test_mode_config(config)
        from pedl.config.yaml12 import dump

        config_yaml = dump(config.raw)

    context = Path(args.context_dir)
    if not context.exists():
        raise CliError(f"context directory {args.context_dir} does not exist", EXIT_BAD_INPUT)
    from pedl.context import ContextError, pack
    from pedl.model_def import ModelDefinitionError
    from pedl.model_def.static_check import check_model_definition

    try:
        packed = pack(context)
        check_model_definition(context, config.entrypoint, [name for name, _ in packed.files])
    except (ContextError, ModelDefinitionError) as e:
        raise CliError(f"context directory {args.context_dir}: {e}", EXIT_BAD_INPUT) from None
    for skipped in packed.skipped:
        print(f"warning: left out {skipped}", file=sys.stderr)

    if args.local:
        if args.paused or args.follow_first_trial:
            flag = "--paused" if args.paused else "--follow-first-trial"
            raise CliError(f"{flag} is for experiments on a cluster; --local runs it here", EXIT_BAD_INPUT)
        from pedl.cli.local import run_local_experiment
        from pedl.experimental._local import local_refusal

        if (refusal := local_refusal(config)) is not None:
            raise CliError(f"{args.config_file}: {refusal}", EXIT_BAD_INPUT)

        return run_local_experiment(config, context, verify_restore=args.test)
    with connect(args) as client:
        with transfer_bar.upload("Uploading the model definition", len(packed.data)) as sent:
            experiment = client.create_experiment(
                config_yaml, packed.data, packed.name, sent, paused=args.paused
            )
        if args.paused:
            print(f"Created experiment {experiment.id} (paused: `det e activate {experiment.id}` starts it)")
            return 0
        print(f"Created experiment {experiment.id}", flush=True)
        if args.follow_first_trial:
            from pedl.cli.cmd_experiment_logs import follow_first_trial

            return follow_first_trial(args, client, experiment.id)
        if args.test:  # as Determined's --test on a cluster: follow the test run, then say how it went
            code = follow(client, experiment.id)
            verdict = "passed" if code == 0 else "failed"
            print(f"Test run of the model definition {verdict} (experiment {experiment.id})", flush=True)
            return code
        if args.follow:
            return follow(client, experiment.id)
    return 0


def follow(client: SchedulerClient, experiment_id: int) -> int:
    """Prints new steps, validations, checkpoints and state changes until the experiment ends; on a
    terminal, below them a live table of the search (search_view), and at the end the best trial."""
    tracker = progress.ProgressTracker()
    client.ride_out_restarts = True
    with LiveOutput(live_wanted()) as out:
        while True:
            # Trials are fetched after the experiment, so once it is terminal this pass sees everything.
            response = client.get_experiment(experiment_id)
            stale = {t.id for t in response.trials if tracker.needs_fetch(t)}
            if len(stale) > _BATCH_FROM:  # one paged call instead of one GetTrial per trial
                details = [d for d in client.trial_details(experiment_id) if d.trial.id in stale]
            else:
                details = [client.get_trial(trial_id) for trial_id in sorted(stale)]
            for detail in details:
                for line in tracker.update(detail):
                    out.line(line)
            out.show(SearchView(response))
            if response.experiment.state in render.TERMINAL_EXPERIMENT_STATES:
                break
            client.wait_experiment(experiment_id, POLL_SECONDS)  # returns early once it has ended
        out.finish(SearchView(response))
    return _report_end(response)


def _report_end(response: Any) -> int:
    print(progress.final_line(response.experiment), flush=True)
    completed = response.experiment.state == render.common_pb2.EXPERIMENT_STATE_COMPLETED
    if not completed:
        for line in progress.error_lines(response):
            print(line, flush=True)
    return 0 if completed else 1


def list_experiments(args: argparse.Namespace) -> int:
    with connect(args) as client:
        experiments = sorted(client.list_experiments(), key=lambda e: e.id)
    if not getattr(args, "all", False):
        experiments = [e for e in experiments if not e.archived]
    rows = [records.experiment_record(e, with_config=False) for e in experiments]
    output.emit(args, rows, render.experiments_table(experiments))
    return 0


def print_experiment_config(args: argparse.Namespace) -> int:
    """The validated config with defaults filled in, as the scheduler stored it (YAML keeps integers
    integers, which the Struct form does not); secrets stay masked."""
    with connect(args) as client:
        response = client.get_experiment(args.experiment_id)
    text = response.experiment.config_yaml
    print(text if text.endswith("\n") else text + "\n", end="")
    return 0


def kill_experiment(args: argparse.Namespace) -> int:
    with connect(args) as client:
        experiment = client.kill_experiment(args.experiment_id)
    state = render.experiment_state(experiment.state)
    if experiment.state in render.TERMINAL_EXPERIMENT_STATES:
        print(f"Killed experiment {experiment.id} (state: {state})")
    else:
        print(
            f"Killing experiment {experiment.id}: its trials are being stopped "
            f"(`pedl experiment wait {experiment.id}` waits for them)"
        )
    return 0


def pause_experiment(args: argparse.Namespace) -> int:
    with connect(args) as client:
        experiment = client.pause_experiment(args.experiment_id)
    print(f"Paused experiment {experiment.id}: running trials checkpoint, then release their slots")
    return 0


def activate_experiment(args: argparse.Namespace) -> int:
    with connect(args) as client:
        experiment = client.activate_experiment(args.experiment_id)
    print(f"Activated experiment {experiment.id} (state: {render.experiment_state(experiment.state)})")
    return 0


def wait_experiment(args: argparse.Namespace) -> int:
    with connect(args) as client:
        client.ride_out_restarts = True
        while True:
            response = client.get_experiment(args.experiment_id)
            if response.experiment.state in render.TERMINAL_EXPERIMENT_STATES:
                return _report_end(response)
            client.wait_experiment(args.experiment_id, _WAIT_SECONDS)


# `det e wait` asks the scheduler to answer when the experiment ends, or after this long.
_WAIT_SECONDS = 30.0


def download_model_def(args: argparse.Namespace) -> int:
    output = Path(args.output_dir)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise CliError(f"output directory {output} exists and is not an empty directory", EXIT_BAD_INPUT)
    with connect(args) as client:
        response = client.get_model_definition(args.experiment_id)
    from pedl.context import ContextError, unpack

    output.mkdir(parents=True, exist_ok=True)
    try:
        unpack(response.model_definition, output)
    except ContextError as e:
        raise CliError(
            f"cannot unpack the model definition of experiment {args.experiment_id}: {e}"
        ) from None
    print(
        f"Wrote the model definition of experiment {args.experiment_id} "
        f"({response.model_definition_name}) to {output}"
    )
    return 0
