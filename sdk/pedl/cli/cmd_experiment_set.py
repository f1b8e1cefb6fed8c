"""`det e set description|name|max-slots|weight|priority|gc-policy ID ...`, with Determined's argument forms:
each goes through PatchExperiment (owner or admin). The resources knobs change how the scheduler
serves a running experiment; a new GC policy deletes the checkpoints it no longer keeps, after
showing them and asking (unless --yes)."""

from __future__ import annotations

import argparse
import sys

from pedl.cli.arguments import non_negative_int, positive_int
from pedl.cli.client import connect
from pedl.cli.errors import CliError
from pedl.v1 import scheduler_pb2


def max_slots(text: str) -> int:
    """A positive slot cap, or `none` (0 on the wire) for no cap, as Determined's none_or_int."""
    if text.strip().lower() == "none":
        return 0
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'none', got {text!r}") from None


def weight(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def priority(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer 1-99, got {text!r}") from None
    if not 1 <= value <= 99:
        raise argparse.ArgumentTypeError(f"expected an integer 1-99 (smaller runs first), got {text!r}")
    return value


def register(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    set_ = commands.add_parser("set", parents=[common], help="change an experiment's settings")
    settings = set_.add_subparsers(dest="setting", required=True, metavar="SETTING")
    description = settings.add_parser("description", parents=[common], help="replace the description")
    description.add_argument("experiment_id", type=positive_int, metavar="ID")
    description.add_argument("description", metavar="DESCRIPTION")
    description.set_defaults(func=set_description)
    name = settings.add_parser("name", parents=[common], help="replace the name (the config's `name`)")
    name.add_argument("experiment_id", type=positive_int, metavar="ID")
    name.add_argument("name", metavar="NAME")
    name.set_defaults(func=set_name)

    for knob, kind, help_text in (
        ("max-slots", max_slots, "most slots its trials hold at once ('none': no cap)"),
        ("weight", weight, "fair-share weight among experiments of one priority"),
        ("priority", priority, "1-99; a smaller number runs first and may preempt"),
    ):
        field = knob.replace("-", "_")
        parser = settings.add_parser(knob, parents=[common], help=f"resources.{field}: {help_text}")
        parser.add_argument("experiment_id", type=positive_int, metavar="ID")
        parser.add_argument("value", type=kind, metavar=field.upper(), help=help_text)
        parser.set_defaults(func=set_resource)

    gc = settings.add_parser(
        "gc-policy", parents=[common], help="set the checkpoint GC policy and delete what it no longer keeps"
    )
    gc.add_argument("experiment_id", type=positive_int, metavar="ID")
    for flag, what in (
        ("--save-experiment-best", "best checkpoints of the whole experiment to keep"),
        ("--save-trial-best", "best checkpoints of each trial to keep"),
        ("--save-trial-latest", "latest checkpoints of each trial to keep"),
    ):
        gc.add_argument(flag, type=non_negative_int, required=True, metavar="N", help=what)
    gc.add_argument("--yes", action="store_true", help="delete without asking")
    gc.set_defaults(func=set_gc_policy)


def set_description(args: argparse.Namespace) -> int:
    request = scheduler_pb2.PatchExperimentRequest(
        experiment_id=args.experiment_id, description=args.description
    )
    with connect(args) as client:
        client.patch_experiment(request)
    print(f"Set description of experiment {args.experiment_id} to {args.description!r}")
    return 0


def set_name(args: argparse.Namespace) -> int:
    request = scheduler_pb2.PatchExperimentRequest(experiment_id=args.experiment_id, name=args.name)
    with connect(args) as client:
        client.patch_experiment(request)
    print(f"Set name of experiment {args.experiment_id} to {args.name!r}")
    return 0


def set_resource(args: argparse.Namespace) -> int:
    field = args.setting.replace("-", "_")
    request = scheduler_pb2.PatchExperimentRequest(experiment_id=args.experiment_id, **{field: args.value})
    with connect(args) as client:
        client.patch_experiment(request)
    shown = "none (no cap)" if field == "max_slots" and args.value == 0 else args.value
    print(f"Set resources.{field} of experiment {args.experiment_id} to {shown}")
    return 0


def set_gc_policy(args: argparse.Namespace) -> int:
    policy = scheduler_pb2.CheckpointGcPolicy(
        save_experiment_best=args.save_experiment_best,
        save_trial_best=args.save_trial_best,
        save_trial_latest=args.save_trial_latest,
    )
    request = scheduler_pb2.PatchExperimentRequest(experiment_id=args.experiment_id, gc_policy=policy)
    with connect(args) as client:
        if not args.yes:
            preview = scheduler_pb2.PatchExperimentRequest()
            preview.CopyFrom(request)
            preview.dry_run = True
            doomed = list(client.patch(preview).deleted_checkpoints)
            if doomed and not _confirmed(args.experiment_id, doomed):
                print("Nothing changed")
                return 1
        deleted = list(client.patch(request).deleted_checkpoints)
    print(
        f"Set the checkpoint GC policy of experiment {args.experiment_id} (save_experiment_best "
        f"{args.save_experiment_best}, save_trial_best {args.save_trial_best}, save_trial_latest "
        f"{args.save_trial_latest}): {len(deleted)} checkpoint(s) deleted"
    )
    for uuid in deleted:
        print(f"  {uuid}")
    return 0


def _confirmed(experiment_id: int, doomed: list[str]) -> bool:
    if not sys.stdin.isatty():
        raise CliError(
            f"the new policy deletes {len(doomed)} checkpoint(s) of experiment {experiment_id}: "
            "pass --yes to confirm"
        )
    print(f"The new policy deletes these {len(doomed)} checkpoint(s) of experiment {experiment_id}:")
    for uuid in doomed:
        print(f"  {uuid}")
    answer = input("Do you wish to proceed? [y/N] ")
    return answer.strip().lower() in ("y", "yes")
