"""`python3 -m determined.launch.wrap_rank RANK [--] COMMAND`: the agent prefixes each rank's lines itself."""

import sys

from determined.launch._exec import exec_command, wrapped_command

if __name__ == "__main__":
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        raise SystemExit("usage: python3 -m determined.launch.wrap_rank RANK [--] COMMAND [ARGS...]")
    exec_command(wrapped_command(sys.argv[2:], "determined.launch.wrap_rank"))
