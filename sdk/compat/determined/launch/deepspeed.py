"""`python3 -m determined.launch.deepspeed [--] COMMAND`: runs COMMAND (a script using
`det_ds.init()` and its Trainer) on each slot's process, which pedl's agent started with
torchrun's environment (DeepSpeed reads the same). `--trial module:Class` never gets here: the
config parser makes it that DeepSpeedTrial class."""

import sys

from determined.launch._exec import exec_command, wrapped_command

if __name__ == "__main__":
    exec_command(wrapped_command(sys.argv[1:], "determined.launch.deepspeed"))
