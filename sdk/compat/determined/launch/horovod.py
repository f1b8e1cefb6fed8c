"""`python3 -m determined.launch.horovod`: refused; pedl launches with torch.distributed's environment."""

from determined.launch._exec import refuse

if __name__ == "__main__":
    refuse(
        "determined.launch.horovod",
        "pedl's agent starts one process per slot with torchrun's environment; use "
        "'python3 -m determined.launch.torch_distributed python3 SCRIPT' and "
        "det.core.DistributedContext.from_torch_distributed()",
    )
