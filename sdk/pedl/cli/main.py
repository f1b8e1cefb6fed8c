"""Entry point of the `pedl` and `det` commands: parsing, dispatch, and turning expected failures
into one-line errors with an exit code."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import grpc

from pedl import __version__
from pedl.cli import (
    cmd_agent,
    cmd_checkpoint,
    cmd_cluster,
    cmd_experiment,
    cmd_master,
    cmd_refused,
    cmd_tensorboard,
    cmd_trial,
    cmd_user,
    completion,
)
from pedl.cli.client import DEFAULT_MASTER
from pedl.cli.errors import EXIT_FAILURE, CliError, rpc_error_message


def build_parser(prog: str = "pedl") -> argparse.ArgumentParser:
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
    modules = (
        cmd_experiment,
        cmd_trial,
        cmd_checkpoint,
        cmd_agent,
        cmd_cluster,
        cmd_tensorboard,
        cmd_user,
        cmd_master,
        cmd_refused,
    )
    for module in modules:
        module.register(groups, common)
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
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_prog())
    completion.enable(parser)
    args = parser.parse_args(_determined_spellings(words))
    if getattr(args, "tls_ca", None):
        os.environ["PEDL_TLS_CA"] = args.tls_ca  # pedl._grpc reads it for every channel of this command
    try:
        return int(args.func(args))
    except CliError as e:
        print(f"error: {e.message}", file=sys.stderr)
        return e.exit_code
    except grpc.RpcError as e:
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
