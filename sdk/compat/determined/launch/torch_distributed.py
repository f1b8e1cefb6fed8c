"""`python3 -m determined.launch.torch_distributed [--] COMMAND`: runs COMMAND on each slot's process."""

import sys

from determined.launch._exec import exec_command, wrapped_command

if __name__ == "__main__":
    exec_command(wrapped_command(sys.argv[1:], "determined.launch.torch_distributed"))
