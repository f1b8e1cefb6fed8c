"""Runs the wrapped command in place of the launcher (the agent already started one per slot)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

from pedl.config.launchers import torch_overrides


def wrapped_command(argv: Sequence[str], launcher: str) -> list[str]:
    """The command after the launcher's own options (and an optional `--`); the options pedl's agent
    decides itself are the config parser's (`pedl.config.launchers`), which refuses others at create."""
    try:
        args = torch_overrides(argv, launcher)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if args and args[0].startswith("--trial"):
        raise SystemExit(
            f"{launcher} --trial: pedl runs a Trial class itself, one process per slot; give its "
            "'module:Class' as the experiment's entrypoint"
        )
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
