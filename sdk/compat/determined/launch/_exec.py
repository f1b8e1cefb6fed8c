"""Runs the wrapped command in place of the launcher (the agent already started one per slot)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

# Options of Determined's torch_distributed launcher that pedl's agent decides itself.
_TORCH_FLAGS_WITH_VALUE = ("--max_restarts", "--nproc_per_node", "--nnodes", "--rdzv_backend")
_TORCH_FLAGS = ("--trust-worker-addrs",)


def wrapped_command(argv: Sequence[str], launcher: str) -> list[str]:
    """The command after the launcher's own options (and an optional `--`)."""
    args = list(argv)
    while args and args[0].startswith("-") and args[0] != "--":
        flag = args.pop(0)
        name = flag.split("=", 1)[0]
        if name in _TORCH_FLAGS:
            continue
        if name in _TORCH_FLAGS_WITH_VALUE:
            if "=" not in flag and args:
                args.pop(0)
            continue
        raise SystemExit(
            f"{launcher}: option {flag} is not supported by pedl (its agent starts one process per slot "
            "itself, with torchrun's environment)"
        )
    if args and args[0] == "--":
        args.pop(0)
    if not args:
        raise SystemExit(f"usage: python3 -m {launcher} [--] COMMAND [ARGS...]")
    return args


def exec_command(command: list[str]) -> None:
    program = command[0]
    if os.sep not in program:
        found = shutil.which(program)
        if found is None:
            raise SystemExit(f"cannot run {program!r}: not found on PATH")
        program = found
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(program, command)


def refuse(launcher: str, instead: str) -> None:
    raise SystemExit(f"{launcher} is not offered by pedl: {instead}")
