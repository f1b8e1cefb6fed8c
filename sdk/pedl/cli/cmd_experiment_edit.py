"""`det e label add|remove`, `det e note` and `det e archive|unarchive|delete` (and `det e set`, in
cmd_experiment_set): what may change after creation goes through PatchExperiment or DeleteExperiment
(owner or admin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pedl.cli import cmd_experiment_set
from pedl.cli.arguments import positive_int
from pedl.cli.client import connect
from pedl.cli.errors import CliError
from pedl.v1 import scheduler_pb2


def register(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    cmd_experiment_set.register(commands, common)

    label = commands.add_parser("label", parents=[common], help="add or remove an experiment's labels")
    actions = label.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, help_text in (("add", "add a label"), ("remove", "remove a label")):
        parser = actions.add_parser(action, parents=[common], help=help_text)
        parser.add_argument("experiment_id", type=positive_int, metavar="ID")
        parser.add_argument("label", metavar="LABEL")
        parser.set_defaults(func=change_label)

    note = commands.add_parser(
        "note", parents=[common], help="print an experiment's notes, or replace them (--set/--file)"
    )
    note.add_argument("experiment_id", type=positive_int, metavar="ID")
    given = note.add_mutually_exclusive_group()
    given.add_argument("--set", dest="text", metavar="TEXT", help="replace the notes with TEXT ('' clears)")
    given.add_argument("--file", type=Path, metavar="F", help="replace the notes with F's text ('-': stdin)")
    note.set_defaults(func=notes)

    for verb, help_text in (
        ("archive", "hide an ended experiment from `det e list` (--all shows it)"),
        ("unarchive", "list an archived experiment again"),
    ):
        parser = commands.add_parser(verb, parents=[common], help=help_text)
        parser.add_argument("experiment_id", type=positive_int, metavar="ID")
        parser.set_defaults(func=archive)
    register_delete(commands, common)


def register_delete(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    delete = commands.add_parser(
        "delete", parents=[common], help="delete an ended experiment, its results, logs and checkpoints"
    )
    delete.add_argument("experiment_id", type=positive_int, metavar="ID")
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    delete.set_defaults(func=delete_experiment)


def delete_experiment(args: argparse.Namespace) -> int:
    if not args.yes:
        if not sys.stdin.isatty():
            raise CliError(f"deleting experiment {args.experiment_id} needs confirmation: pass --yes")
        answer = input(f"Delete experiment {args.experiment_id} with its results and checkpoints? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Nothing deleted")
            return 1
    with connect(args) as client:
        deleted = client.delete_experiment(args.experiment_id)
    print(f"Deleted experiment {args.experiment_id} and its {deleted} checkpoint(s)")
    return 0


def change_label(args: argparse.Namespace) -> int:
    request = scheduler_pb2.PatchExperimentRequest(experiment_id=args.experiment_id)
    (request.add_labels if args.action == "add" else request.remove_labels).append(args.label)
    with connect(args) as client:
        experiment = client.patch_experiment(request)
    verb = "Added label" if args.action == "add" else "Removed label"
    print(f"{verb} {args.label!r} {'to' if args.action == 'add' else 'from'} experiment {experiment.id} "
          f"(labels: {', '.join(experiment.labels) or 'none'})")  # fmt: skip
    return 0


def archive(args: argparse.Namespace) -> int:
    archived = args.command == "archive"
    request = scheduler_pb2.PatchExperimentRequest(experiment_id=args.experiment_id, archived=archived)
    with connect(args) as client:
        client.patch_experiment(request)
    print(f"{'Archived' if archived else 'Unarchived'} experiment {args.experiment_id}")
    return 0


def notes(args: argparse.Namespace) -> int:
    """Without --set/--file prints the notes as kept; with them replaces them (owner or admin)."""
    text = args.text if args.file is None else _read_notes(args.file)
    with connect(args) as client:
        if text is None:
            kept = client.get_experiment(args.experiment_id).experiment.notes
            print(kept, end="" if not kept or kept.endswith("\n") else "\n")
            return 0
        request = scheduler_pb2.PatchExperimentRequest(experiment_id=args.experiment_id, notes=text)
        client.patch_experiment(request)
    print(f"Set the notes of experiment {args.experiment_id} ({len(text):,} characters)")
    return 0


def _read_notes(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read notes from {path}: {getattr(e, 'strerror', None) or e}") from None
