"""A plain PyTorch training loop made a pedl trial with Determined's Core API.

Fits y = 3x - 1 with a linear model. Run it as is (`python3 train.py`: dummy mode, checkpoints
under ~/.local/share/determined) or submit it (`pedl experiment create single.yaml .`). On a
cluster the learning rate comes from the trial's hyperparameters, metrics and checkpoints go to
pedl, and the loop stops (after a checkpoint) when pedl pauses, preempts or stops the trial.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import determined as det
import torch


def batches(seed: int, batch_size: int = 32):
    generator = torch.Generator().manual_seed(seed)
    while True:
        x = torch.rand(batch_size, 1, generator=generator) * 4 - 2
        yield x, 3 * x - 1 + 0.01 * torch.randn(batch_size, 1, generator=generator)


def validation_loss(model: torch.nn.Module) -> float:
    x = torch.linspace(-2, 2, 64).unsqueeze(1)
    with torch.no_grad():
        return float(torch.nn.functional.mse_loss(model(x), 3 * x - 1))


def save(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: int) -> None:
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path / "state.pt")
    (path / "progress.json").write_text(json.dumps({"steps_completed": steps}))


def load(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    state = torch.load(path / "state.pt")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return int(json.loads((path / "progress.json").read_text())["steps_completed"])


def main(core_context, steps: int, lr: float, report_every: int, step_seconds: float) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    info = det.get_cluster_info()
    done = 0
    if info is not None and info.latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            done = load(path, model, optimizer)
        logging.info("resumed at step %d from checkpoint %s", done, info.latest_checkpoint)
    data = batches(seed=done)
    losses = []
    while done < steps:
        x, y = next(data)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        done += 1
        time.sleep(step_seconds)
        if done % report_every == 0 or done == steps:
            core_context.train.report_training_metrics(
                steps_completed=done, metrics={"loss": sum(losses) / len(losses)}
            )
            losses = []
            core_context.train.report_validation_metrics(
                steps_completed=done, metrics={"validation_loss": validation_loss(model), "batches": done}
            )
            core_context.train.report_progress(done / steps)
            with core_context.checkpoint.store_path({"steps_completed": done}) as (path, _uuid):
                save(path, model, optimizer, done)
            if core_context.preempt.should_preempt():
                logging.info("stopping at step %d: pedl asked the trial to stop", done)
                return


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--report-every", type=int, default=10)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="slow the loop down (tests)")
    args = parser.parse_args()
    info = det.get_cluster_info()
    lr = float(info.trial.hparams.get("lr", 0.05)) if info is not None else 0.05
    with det.core.init() as core_context:
        main(core_context, args.steps, lr, args.report_every, args.step_seconds)
