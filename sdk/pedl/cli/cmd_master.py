"""`det master info|config|logs` and `det version`."""

from __future__ import annotations

import argparse
from pathlib import Path

from pedl import __version__
from pedl.cli import output
from pedl.cli.arguments import positive_int
from pedl.cli.client import connect
from pedl.cli.errors import CliError


def register(group: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Adds the group's commands to its parser (pedl.cli.main makes the parser, names and help)."""
    commands = group.add_subparsers(dest="command", required=True, metavar="COMMAND")
    info = commands.add_parser("info", parents=[common], help="the scheduler's version and addresses")
    output.add_format_flags(info)
    info.set_defaults(func=master_info)

    config = commands.add_parser(
        "config", parents=[common], help="the scheduler's settings, secrets left out (admins only)"
    )
    config.add_argument("--json", action="store_true", help="JSON instead of YAML")
    config.set_defaults(func=master_config)

    logs = commands.add_parser("logs", parents=[common], help="the local cluster's scheduler log")
    logs.add_argument("--tail", type=positive_int, metavar="N", help="only the last N lines")
    logs.add_argument(
        "--home", help="state directory of `pedl cluster up` (default: $PEDL_HOME, else ~/.pedl)"
    )
    logs.set_defaults(func=master_logs)


def register_version(version: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    version.set_defaults(func=show_version)


def master_info(args: argparse.Namespace) -> int:
    with connect(args) as client:
        info = client.get_cluster_info()
    record = {
        "master": args.master_address,
        "version": info.version,
        "cluster_id": info.cluster_id,
        "checkpoint_store_address": info.checkpoint_store_address,
    }
    text = "\n".join(f"{k}: {v}" for k, v in record.items())
    output.emit(args, record, text)
    return 0


def master_config(args: argparse.Namespace) -> int:
    import json

    with connect(args) as client:
        settings = json.loads(client.get_master_config().config_json)
    if args.json:
        print(json.dumps(settings, indent=2, sort_keys=True))
    else:
        from pedl.config.yaml12 import dump

        print(dump(settings), end="")
    return 0


def master_logs(args: argparse.Namespace) -> int:
    """The scheduler logs to its own stderr; a cluster started by `pedl cluster up` keeps it in a file."""
    from pedl.cluster.paths import pedl_home

    home = pedl_home(args.home)
    log = Path(home, "cluster", "scheduler.log")
    if not log.is_file():
        raise CliError(f"no scheduler log at {log}: only a cluster started by `pedl cluster up` keeps one")
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    for line in lines[-args.tail :] if args.tail else lines:
        print(line)
    return 0


def show_version(args: argparse.Namespace) -> int:
    print(f"client: {__version__}")
    with connect(args) as client:
        print(f"master: {client.get_cluster_info().version}")
    return 0
