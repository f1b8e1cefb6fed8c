"""`det trial logs|describe|download|kill`."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from pedl import records
from pedl.cli import output, render
from pedl.cli.arguments import non_negative_int, positive_int
from pedl.cli.client import connect
from pedl.cli.errors import CliError
from pedl.v1 import common_pb2


def register(group: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Adds the group's commands to its parser (pedl.cli.main makes the parser, names and help)."""
    commands = group.add_subparsers(dest="command", required=True, metavar="COMMAND")

    logs = commands.add_parser("logs", parents=[common], help="print a trial's log (the user's output)")
    logs.add_argument("trial_id", type=positive_int, metavar="TRIAL_ID")
    add_log_flags(logs)
    logs.set_defaults(func=trial_logs)

    describe = commands.add_parser("describe", parents=[common], help="show a trial and its checkpoints")
    describe.add_argument("trial_id", type=positive_int, metavar="TRIAL_ID")
    describe.add_argument(
        "--metrics",
        action="store_true",
        help="also every training step and every custom metric group's reports",
    )
    output.add_format_flags(describe)
    describe.set_defaults(func=describe_trial)

    download = commands.add_parser("download", parents=[common], help="download one of a trial's checkpoints")
    download.add_argument("trial_id", type=positive_int, metavar="TRIAL_ID")
    which = download.add_mutually_exclusive_group(required=True)
    which.add_argument("--best", action="store_true", help="the checkpoint with the best searcher metric")
    which.add_argument("--latest", action="store_true", help="the newest checkpoint")
    which.add_argument("--uuid", metavar="UUID", help="this checkpoint of the trial")
    download.add_argument("-o", "--output-dir", metavar="DIR", help="default ./checkpoints/UUID")
    download.set_defaults(func=download_trial)

    kill = commands.add_parser("kill", parents=[common], help="stop one trial; its experiment goes on")
    kill.add_argument("trial_id", type=positive_int, metavar="TRIAL_ID")
    kill.set_defaults(func=kill_trial)


def add_log_flags(logs: argparse.ArgumentParser) -> None:
    """-f, --head/--tail, --system, --json: `det trial logs` and `det experiment logs` alike."""
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing new lines until the trial ends"
    )
    ends = logs.add_mutually_exclusive_group()
    ends.add_argument("--head", type=non_negative_int, metavar="N", help="only the first N lines")
    tail_help = "only the last N lines (with -f: then each new one)"
    ends.add_argument("--tail", type=non_negative_int, metavar="N", help=tail_help)
    logs.add_argument("--system", action="store_true", help="also pedl's own lines (marked [pedl])")
    logs.add_argument("--json", action="store_true", help="one JSON object per line")


def trial_logs(args: argparse.Namespace) -> int:
    hidden = 0

    def shown(line: common_pb2.LogLine) -> bool:
        nonlocal hidden
        if args.system or not records.is_system_line(line.source, line.message):
            return True
        hidden += 1
        return False

    with connect(args) as client:
        lines: Iterable[common_pb2.LogLine]
        if args.tail is None:
            lines = (line for line in client.trial_logs(args.trial_id, follow=args.follow) if shown(line))
        else:  # the scheduler cuts the tail; a follow goes on after the newest stored line
            lines, newest = client.trial_log_tail(args.trial_id, args.tail, shown, patient=args.follow)
            if args.follow:
                after = client.trial_logs(args.trial_id, follow=True, after_id=newest)
                lines = itertools.chain(lines, (line for line in after if shown(line)))
        printed = 0
        for count, line in enumerate(lines):
            if args.head is not None and count >= args.head:
                break
            printed += 1
            if args.json:
                print(json.dumps(records.log_record(line)), flush=args.follow)
                continue
            message = line.message.rstrip("\n")
            if args.system and records.is_system_line(line.source, line.message):
                message = f"[pedl] {message}"
            print(message, flush=args.follow)
    if not printed and hidden:
        # Nothing of the trial's own code (yet): say where pedl's lines are rather than print nothing.
        print(
            f"trial {args.trial_id} has logged only pedl's own lines ({hidden}); show them with --system",
            file=sys.stderr,
        )
    return 0


def describe_trial(args: argparse.Namespace) -> int:
    with connect(args) as client:
        detail = client.get_trial(args.trial_id, group_figures=True)
        experiment = client.get_experiment(detail.trial.experiment_id).experiment
        groups = detail.metric_groups if args.metrics else []  # each report: with --metrics only
        reports = {g.group: client.group_reports(args.trial_id, g.group) for g in groups}
    record = records.trial_detail_record(detail, records.hparam_space(experiment), metrics=args.metrics)
    from pedl.timeline import timeline_records  # statistics: only `trial describe` needs it

    record["timeline"] = timeline_records(detail.timeline)
    for group, rows in reports.items():
        record["metric_groups"][group]["history"] = rows
    text = render.describe_trial(detail, steps=args.metrics, group_reports=reports)
    csv_rows = [{k: v for k, v in record.items() if not isinstance(v, list) and k != "metric_groups"}]
    output.emit(args, record, text, csv_rows=csv_rows)
    return 0


def download_trial(args: argparse.Namespace) -> int:
    from pedl.cli.cmd_checkpoint import fetch_checkpoint
    from pedl.cli.cmd_experiment_views import ranked_checkpoints

    with connect(args) as client:
        detail = client.get_trial(args.trial_id)
        response = client.get_experiment(detail.trial.experiment_id)
    ranked = ranked_checkpoints(response, [detail])
    if args.uuid:
        chosen = [c for c, _ in ranked if c.uuid == args.uuid]
    elif args.best:
        chosen = [c for c, value in ranked if value is not None][:1]
    else:
        chosen = sorted((c for c, _ in ranked), key=lambda c: c.total_batches, reverse=True)[:1]
    if not chosen:
        what = args.uuid or ("validated " if args.best else "") + "completed checkpoint"
        raise CliError(f"trial {args.trial_id} has no {what}")
    uuid = chosen[0].uuid
    fetch_checkpoint(args, uuid, Path(args.output_dir) if args.output_dir else Path("checkpoints") / uuid)
    return 0


def kill_trial(args: argparse.Namespace) -> int:
    with connect(args) as client:
        trial = client.kill_trial(args.trial_id)
    if trial.state in render.TERMINAL_TRIAL_STATES:
        print(f"Killed trial {trial.id} (state: {render.trial_state(trial.state)})")
    else:
        print(f"Killing trial {trial.id}: its run is being stopped; experiment {trial.experiment_id} goes on")
    return 0
