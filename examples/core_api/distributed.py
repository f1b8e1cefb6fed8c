"""The same loop on several processes: gradients averaged with torch.distributed, one report.

Launched with `python3 -m determined.launch.torch_distributed python3 distributed.py`; pedl's agent
starts one process per slot with torchrun's environment.
"""

from __future__ import annotations

import logging

import determined as det
import torch
import torch.distributed as dist
from train import batches, validation_loss


def main(core_context, steps: int) -> None:
    rank = core_context.distributed.rank
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = batches(seed=rank)
    for done in range(1, steps + 1):
        x, y = next(data)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= core_context.distributed.size
        optimizer.step()
        if done % 10 == 0:
            losses = core_context.distributed.allgather(loss.item())
            if rank == 0:
                core_context.train.report_training_metrics(
                    steps_completed=done, metrics={"loss": sum(losses) / len(losses), "workers": len(losses)}
                )
                core_context.train.report_validation_metrics(
                    steps_completed=done, metrics={"validation_loss": validation_loss(model)}
                )
            if core_context.preempt.should_preempt():
                return
    # Every rank writes its own part of one checkpoint (here: its view of the model).
    with core_context.checkpoint.store_path({"steps_completed": steps}, shard=True) as (path, _uuid):
        torch.save(model.state_dict(), path / f"model-rank{rank}.pt")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    dist.init_process_group("gloo")
    distributed = det.core.DistributedContext.from_torch_distributed()
    with det.core.init(distributed=distributed) as core_context:
        main(core_context, steps=40)
    dist.barrier()
    dist.destroy_process_group()
