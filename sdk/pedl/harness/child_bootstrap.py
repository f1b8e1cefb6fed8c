"""How the harness starts a script's process so that it dies with the harness."""

from __future__ import annotations

import os
import sys

# Runs first in the script's process, then execs the script: the script dies with its harness even when
# the harness is SIGKILLed (Linux's parent-death signal survives exec). Not a `preexec_fn`: Python code
# between fork and exec in the harness (which runs gRPC's threads) crashes some children (SIGABRT).
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "parent = int(sys.argv[1])\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "if os.getppid() != parent:\n"  # the harness died before the signal was armed
    "    os._exit(1)\n"
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as e:\n"
    "    print(f'pedl.harness: cannot start the entrypoint {sys.argv[2]!r}: {e}', file=sys.stderr)\n"
    "    os._exit(127)\n"
)


def dying_with_this_process(command: list[str]) -> list[str]:
    """`command`, started through a small exec bootstrap that ties it to this process's life (Linux)."""
    if not sys.platform.startswith("linux") or not command:
        return command
    return [sys.executable, "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]
