"""Determined's launchers (`python3 -m determined.launch.<name> ... script`) on pedl.

pedl's agent is itself the launcher: it starts one process per slot with torchrun's environment
(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and runs the
entrypoint in each. So `determined.launch.torch_distributed` and `determined.launch.wrap_rank` run
the wrapped command in place; launchers of other runtimes are refused with what to use instead.
"""
