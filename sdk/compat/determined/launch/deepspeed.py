"""`python3 -m determined.launch.deepspeed`: run as a command, refused; `--trial module:Class` in an
entrypoint is that DeepSpeedTrial, which pedl's agent runs one process per slot itself."""

from determined.launch._exec import refuse

if __name__ == "__main__":
    refuse(
        "determined.launch.deepspeed",
        "pedl's agent starts one process per slot with torchrun's environment; use "
        "'python3 -m determined.launch.deepspeed --trial module:Class' (a DeepSpeedTrial) as the "
        "entrypoint, or 'python3 -m determined.launch.torch_distributed python3 SCRIPT'",
    )
