"""Harness overhead: samples/s of PyTorchTrialController.train_until vs a plain PyTorch loop.

Both train the digits example's model (examples/digits_pytorch) on the same data for the same
number of batches, calling the trial's own losses() and training_metrics(), so the ratio
measures only what the harness adds. Runs alternate (in both orders) to share machine noise;
best and median rates are compared.

    .venv/bin/python benchmarks/harness_throughput.py [--batches 3000] [--repeats 5] [--device cuda] [--smoke]

Both loops run on `--device` (default cpu): the harness would otherwise pick CUDA by itself on a
GPU machine while the plain loop stayed on the CPU.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from pathlib import Path
from typing import Any

import torch
import yaml

from pedl.harness.build import seed_all
from pedl.model_def import load_model_definition
from pedl.pytorch import PyTorchTrialController

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits_pytorch"


def plain_loop(
    trial: Any, loader: torch.utils.data.DataLoader, batches: int, device: torch.device
) -> tuple[float, int]:
    """The loop a user would write by hand; returns (seconds, samples)."""
    model = trial.build_model(trial.hparams).to(device)
    optimizer = trial.optimizer(model)
    model.train()
    losses, extra, samples = [], [], 0
    start = time.perf_counter()
    for x, y in itertools.islice(itertools.chain.from_iterable(itertools.repeat(loader)), batches):
        samples += len(x)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        predictions = model(x)
        loss = trial.losses(predictions, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        with torch.no_grad():
            extra.append(trial.training_metrics(predictions, y, loss))
    torch.stack(losses).mean().item()
    _synchronize(device)
    return time.perf_counter() - start, samples


def harness_loop(
    model_def: Any, config: dict[str, Any], hparams: dict[str, Any], batches: int, device: torch.device
) -> tuple[float, int]:
    loaders = model_def.make_data_loaders(config, hparams)
    controller = PyTorchTrialController.from_trial_class(
        model_def.trial_class, hparams, loaders, device=device
    )
    start = time.perf_counter()
    result = controller.train_until(batches)
    _synchronize(device)
    return time.perf_counter() - start, result.num_inputs


def _synchronize(device: torch.device) -> None:
    """Queued GPU work counts towards the loop that queued it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: least noise)")
    parser.add_argument(
        "--device", default="cpu", help="torch device both loops train on (cpu, cuda, cuda:1)"
    )
    parser.add_argument("--smoke", action="store_true", help="50 batches once each: checks it runs")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: torch sees no CUDA device here")
    if args.smoke:
        args.batches, args.repeats = 50, 1
    torch.set_num_threads(args.threads)

    config = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    hparams = {name: spec["val"] for name, spec in config["hyperparameters"].items()}
    model_def = load_model_definition(EXAMPLE)
    # Warm-up: the first optimizer steps import lazily and would bill whichever loop runs first.
    harness_loop(model_def, config, hparams, 5 if args.smoke else 50, device)
    plain_rates, harness_rates = [], []
    for repeat in range(args.repeats):
        for harness_turn in (True, False) if repeat % 2 else (False, True):
            seed_all(0)
            if harness_turn:
                seconds, samples = harness_loop(model_def, config, hparams, args.batches, device)
                harness_rates.append(samples / seconds)
            else:
                train_loader, _ = model_def.make_data_loaders(config, hparams)
                seconds, samples = plain_loop(
                    model_def.trial_class(hparams), train_loader, args.batches, device
                )
                plain_rates.append(samples / seconds)

    best_plain, best_harness = max(plain_rates), max(harness_rates)
    print(f"device:               {device} ({_device_name(device)})")
    print(f"batches per run:      {args.batches} (x{args.repeats} runs each, alternating)")
    plain_median, harness_median = statistics.median(plain_rates), statistics.median(harness_rates)
    print(f"plain PyTorch loop:   {best_plain:,.0f} samples/s (median {plain_median:,.0f})")
    print(f"pedl harness:         {best_harness:,.0f} samples/s (median {harness_median:,.0f})")
    print(
        f"ratio harness/plain:  {best_harness / best_plain:.3f} best, "
        f"{harness_median / plain_median:.3f} median  (target >= 0.98)"
    )


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"


if __name__ == "__main__":
    main()
