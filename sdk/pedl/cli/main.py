"""Entry point of the `pedl` and `det` commands: parsing, dispatch, and turning expected failures
into one-line errors with an exit code."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from pedl import __version__
from pedl.cli import cmd_refused, completion, deferred_imports
from pedl.cli.errors import EXIT_FAILURE, exit_code
from pedl.client import DEFAULT_MASTER, ClientError


class Group(NamedTuple):
    """A command group; its module (which imports gRPC, the protos, the checkpoint client) is imported
    only when the group runs, so `pedl --help` and `pedl version` start without them."""

    name: str
    aliases: tuple[str, ...]
    help: str
    module: str
    register: str = "register"


GROUPS = (
    Group("experiment", ("e",), "manage experiments", "cmd_experiment"),
    Group("trial", ("t",), "inspect trials", "cmd_trial"),
    Group("checkpoint", (), "list, download or delete checkpoints", "cmd_checkpoint"),
    Group("agent", ("a",), "inspect agents", "cmd_agent"),
    Group("slot", ("s",), "inspect slots", "cmd_agent", "register_slot"),
    Group("job", ("j",), "the job queue: active experiments and Slurm pilot jobs", "cmd_job"),
    Group("cluster", (), "start or stop a local cluster", "cmd_cluster"),
    Group(
        "tensorboard",
        (),
        "experiments' metrics and trials' own event files in TensorBoard (also `det tensorboard start`)",
        "cmd_tensorboard",
    ),
    Group("user", ("u",), "log in and manage users", "cmd_user"),
    Group("master", (), "the scheduler (Determined's master)", "cmd_master"),
    Group("version", (), "the CLI's and the scheduler's versions", "cmd_master", "register_version"),
)
_VALUED_FLAGS = ("-m", "--master", "--tls-ca")


def chosen_group(argv: Sequence[str]) -> str | None:
    """The group word of a command line (`e` in `pedl -m host:8080 e list`), or None."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in _VALUED_FLAGS else 1
    return argv[i] if i < len(argv) else None


def build_parser(prog: str = "pedl", load: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `load`, only the named groups get their commands (the others are
    listed in --help but not imported)."""
    # --master is accepted before or after the subcommand; SUPPRESS keeps a later default from
    # overwriting an earlier value.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-m",
        "--master",
        default=argparse.SUPPRESS,
        metavar="HOST:PORT",
        help=f"scheduler address (default: $PEDL_MASTER, else {DEFAULT_MASTER})",
    )
    common.add_argument(
        "--tls-ca",
        default=argparse.SUPPRESS,
        metavar="PEM",
        help="CA bundle that verifies the cluster's TLS certificates (default: $PEDL_TLS_CA, else plaintext)",
    )
    parser = argparse.ArgumentParser(
        prog=prog, parents=[common], description="Train deep-learning models on a pedl cluster."
    )
    parser.add_argument("-v", "--version", action="version", version=f"{prog} {__version__}")
    groups = parser.add_subparsers(dest="group", required=True, metavar="COMMAND")
    wanted = None if load is None else set(load)
    for group in GROUPS:
        sub = groups.add_parser(group.name, aliases=list(group.aliases), help=group.help, parents=[common])
        if wanted is None or wanted & {group.name, *group.aliases}:
            module = importlib.import_module(f"pedl.cli.{group.module}")
            getattr(module, group.register)(sub, common)
    cmd_refused.register(groups, common)
    return parser


def _prog() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name in ("pedl", "det") else "pedl"


def _determined_spellings(argv: list[str]) -> list[str]:
    """`det tensorboard start ID...` is Determined's form of `pedl tensorboard ID...`."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("-m", "--master", "--tls-ca") else 1
    if argv[i : i + 2] == ["tensorboard", "start"]:
        return argv[: i + 1] + argv[i + 2 :]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # run as the `pedl` program (not called by a test or a library)
        deferred_imports.install()
    words = _determined_spellings(list(sys.argv[1:] if argv is None else argv))
    # Shell completion needs every parser; a command needs only its group's.
    group = None if completion.requested() else chosen_group(words)
    parser = build_parser(_prog(), load=None if completion.requested() else [group] if group else [])
    completion.enable(parser)
    args = parser.parse_args(words)
    if getattr(args, "tls_ca", None):
        os.environ["PEDL_TLS_CA"] = args.tls_ca  # pedl._grpc reads it for every channel of this command
    try:
        return int(args.func(args))
    except ClientError as e:
        print(f"error: {e.message}", file=sys.stderr)
        return exit_code(e)
    except Exception as e:
        # gRPC is imported by the commands that call the scheduler, never here (it costs start time).
        grpc = sys.modules.get("grpc")
        if grpc is None or not isinstance(e, grpc.RpcError):
            raise
        from pedl.cli.errors import rpc_error_message

        master = getattr(args, "master_address", None) or getattr(args, "master", None) or DEFAULT_MASTER
        print(f"error: {rpc_error_message(e, master)}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `pedl experiment list | head`: the reader left; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
