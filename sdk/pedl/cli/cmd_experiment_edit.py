"""`det e set description|max-slots|weight|priority|gc-policy`, `det e label add|remove` and
`det e archive|unarchive|delete`: what may change after creation goes through PatchExperiment (owner or
admin); the scheduling knobs pedl does not have are refused with one line."""

from __future__ import annotations

import argparse
import sys

from pedl.cli.arguments import positive_int
from pedl.cli.client import connect
from pedl.cli.errors import CliError
from pedl.v1 import scheduler_pb2

_NO_KNOB = {
    "max-slots": "pedl has no per-experiment slot cap; set resources.slots_per_trial in the config",
    "weight": "pedl's fair share has no per-experiment weight",
    "priority": "pedl's scheduler has no experiment priorities",
    "gc-policy": "the checkpoint GC policy is fixed at creation (checkpoint_storage.save_* in the config)",
}


def register(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    set_ = commands.add_parser("set", parents=[common], help="change an experiment's settings")
    settings = set_.add_subparsers(dest="setting", required=True, metavar="SETTING")
    description = settings.add_parser("description", parents=[common], help="replace the description")
    description.add_argument("experiment_id", type=positive_int, metavar="ID")
    description.add_argument("description", metavar="DESCRIPTION")
    description.set_defaults(func=set_description)
    for knob, why in _NO_KNOB.items():
        parser = settings.add_parser(knob, parents=[common], help=f"(not in pedl) {why}")
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        parser.set_defaults(func=_refuse(f"`det experiment set {knob}`: {why}"))

    label = commands.add_parser("label", parents=[common], help="add or remove an experiment's labels")
    actions = label.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, help_text in (("add", "add a label"), ("remove", "remove a label")):
        parser = actions.add_parser(action, parents=[common], help=help_text)
        parser.add_argument("experiment_id", type=positive_int, metavar="ID")
        parser.add_argument("label", metavar="LABEL")
        parser.set_defaults(func=change_label)

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


def _refuse(message: str):  # type: ignore[no-untyped-def]
    def refuse(args: argparse.Namespace) -> int:
        raise CliError(message)

    return refuse


def set_description(args: argparse.Namespace) -> int:
    request = scheduler_pb2.PatchExperimentRequest(
        experiment_id=args.experiment_id, description=args.description
    )
    with connect(args) as client:
        client.patch_experiment(request)
    print(f"Set description of experiment {args.experiment_id} to {args.description!r}")
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
