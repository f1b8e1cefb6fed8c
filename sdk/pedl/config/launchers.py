"""Determined's launch layers in an entrypoint (`python3 -m determined.launch.<name> ...`), decided at create.

pedl's agent is itself the launcher: it starts one process per slot with torchrun's environment. So
- `determined.launch.torch_distributed [OVERRIDES --] --trial M:C` and `determined.launch.horovod
  [--autohorovod] --trial M:C` are the Trial class `M:C` (Determined documents the legacy
  `entrypoint: M:C` as exactly these launches), run one process per slot as pedl runs any Trial;
- `determined.launch.torch_distributed [OVERRIDES --] COMMAND`, `determined.launch.deepspeed [--]
  COMMAND` (a script using `det_ds.init()` and its Trainer), `determined.launch.tensorflow [--]
  COMMAND` (a script using `DistributedContext.from_tf_config()`: on several slots each process gets
  TF_CONFIG naming every rank) and `determined.launch.wrap_rank RANK COMMAND` stay commands (the
  compat package runs COMMAND in place, `determined.launch._exec`);
- every other launcher (horovod around a script) and any override pedl's agent cannot honour is
  refused here, naming `entrypoint`, rather than failing when the trial starts.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from pedl.config.errors import FieldError, FieldPath

PREFIX = "determined.launch."
# Options of Determined's torch_distributed launcher that pedl's agent decides itself (ignored).
TORCH_FLAGS_WITH_VALUE = ("--max_restarts", "--nproc_per_node", "--nnodes", "--rdzv_backend")
TORCH_FLAGS = ("--trust-worker-addrs",)
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_INSTEAD = (
    "pedl's agent starts one process per slot with torchrun's environment; use "
    "'python3 -m determined.launch.torch_distributed python3 SCRIPT' (with "
    "det.core.DistributedContext.from_torch_distributed()) or a Trial class entrypoint 'module:Class'"
)
_REFUSED = {
    "horovod": "pedl does not run horovodrun; only '--trial module:Class' is taken (as that Trial class)",
}


def launcher_of(command: Sequence[str]) -> tuple[str, list[str]] | None:
    """(launcher name, its arguments) when `command` is `python -m determined.launch.NAME ...`."""
    if len(command) < 3 or command[1] != "-m" or not command[2].startswith(PREFIX):
        return None
    if not _PYTHON.match(posixpath.basename(command[0])):
        return None
    return command[2][len(PREFIX) :], list(command[3:])


def torch_overrides(args: Sequence[str], launcher: str) -> list[str]:
    """The arguments after torch_distributed's own options (and an optional `--`); a ValueError
    naming an option pedl's agent cannot honour (it starts one process per slot itself)."""
    rest = list(args)
    while rest and rest[0].startswith("-") and rest[0] not in ("--", "--trial"):
        flag = rest.pop(0)
        name = flag.split("=", 1)[0]
        if name in TORCH_FLAGS:
            continue
        if name in TORCH_FLAGS_WITH_VALUE:
            if "=" not in flag and rest:
                rest.pop(0)
            continue
        raise ValueError(
            f"{launcher}: option {flag} is not supported by pedl (its agent starts one process per slot "
            "itself, with torchrun's environment)"
        )
    if rest and rest[0] == "--":
        rest.pop(0)
    return rest


def tensorflow_command(args: Sequence[str], launcher: str) -> list[str]:
    """The command after `determined.launch.tensorflow`'s optional `--`; a ValueError when there is
    none, or when an option comes first (Determined's launcher takes none)."""
    if args and args[0].startswith("-") and args[0] != "--":
        raise ValueError(f"{launcher}: option {args[0]} is not supported by pedl; give '[--] COMMAND'")
    rest = list(args[1:] if args[:1] == ["--"] else args)
    if not rest:
        raise ValueError(f"{launcher}: no command to launch")
    return rest


def trial_reference(command: Sequence[str], path: FieldPath) -> str | None:
    """`M:C` when `command` launches a Trial class through a launcher pedl stands in for; None when it
    is a command pedl runs as one; a FieldError when it names a launcher pedl does not offer."""
    found = launcher_of(command)
    if found is None:
        return None
    name, args = found
    shown = f"{PREFIX}{name}"
    if name in ("horovod", "deepspeed"):
        rest = [a for a in args if a != "--autohorovod"]
        if len(rest) == 2 and rest[0] == "--trial":
            return rest[1]
        if len(rest) == 1 and rest[0].startswith("--trial="):
            return rest[0].split("=", 1)[1]
    if name in _REFUSED:
        raise FieldError(path, f"{shown} is not supported by pedl: {_REFUSED[name]}; {_INSTEAD}")
    if name == "wrap_rank":
        if len(args) < 2 or not args[0].isdigit():
            raise FieldError(path, f"{shown}: expected 'RANK [--] COMMAND...', got {' '.join(args)!r}")
        return None
    if name == "tensorflow":
        try:
            tensorflow_command(args, shown)
        except ValueError as e:
            raise FieldError(path, str(e)) from None
        return None
    if name not in ("torch_distributed", "deepspeed"):
        raise FieldError(path, f"{shown} is not a launcher pedl knows; {_INSTEAD}")
    try:
        rest = torch_overrides(args, shown)
    except ValueError as e:
        raise FieldError(path, str(e)) from None
    if rest and rest[0].startswith("--trial"):
        ref = rest[0].split("=", 1)[1] if "=" in rest[0] else (rest[1] if len(rest) > 1 else "")
        extra = rest[1:] if "=" in rest[0] else rest[2:]
        if not ref or extra:
            raise FieldError(path, f"{shown}: '--trial' takes one 'module:Class' and nothing after it")
        return ref
    if not rest:
        raise FieldError(path, f"{shown}: no command to launch")
    return None
