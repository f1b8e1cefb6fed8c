"""`pedl trial logs|describe`."""

from __future__ import annotations

import argparse

from pedl.cli import render
from pedl.cli.arguments import positive_int
from pedl.cli.client import connect


def register(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    group = groups.add_parser("trial", aliases=["t"], help="inspect trials", parents=[common])
    commands = group.add_subparsers(dest="command", required=True, metavar="COMMAND")

    logs = commands.add_parser("logs", parents=[common], help="print a trial's log")
    logs.add_argument("trial_id", type=positive_int, metavar="TRIAL_ID")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing new lines until the trial ends"
    )
    logs.set_defaults(func=trial_logs)

    describe = commands.add_parser(
        "describe", parents=[common], help="show a trial's steps, validations, checkpoints"
    )
    describe.add_argument("trial_id", type=positive_int, metavar="TRIAL_ID")
    describe.set_defaults(func=describe_trial)


def trial_logs(args: argparse.Namespace) -> int:
    with connect(args) as client:
        for line in client.trial_logs(args.trial_id, follow=args.follow):
            print(line.message.rstrip("\n"), flush=args.follow)
    return 0


def describe_trial(args: argparse.Namespace) -> int:
    with connect(args) as client:
        print(render.describe_trial(client.get_trial(args.trial_id)))
    return 0
