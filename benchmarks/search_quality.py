"""Search quality: ASHA vs random search on a real task, in compute to reach a validation error.

An MLP on scikit-learn's digits (bundled, no download) is trained for real with plain torch. The
searchers are driven by an in-process runner that plays the scheduler: it applies their operations,
trains each trial to the requested absolute length, validates, and reports the validation error.
Models stay in memory per trial, so a promoted ASHA trial continues training, and a trial created
with `checkpoint_from` starts from a copy of that trial's model and optimizer.

Both searchers get the same number of trials, space and concurrency. For each seed it prints the
compute (batches trained, in search order) until some trial first reported a validation error at
or below each target, the best error and the total compute; then ASHA's compute to reach each
target as a fraction of random search's. It prints, never asserts.

    .venv/bin/python benchmarks/search_quality.py [--seeds 5] [--trials 64] [--target 0.05] [--smoke]
"""

from __future__ import annotations

import argparse
import copy
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from sklearn.datasets import load_digits
from torch import nn

from pedl.config import parse_experiment_config
from pedl.searcher import Close, Create, Resume, SearchMethod, Shutdown, ValidateAfter, make_search_method

MAX_LENGTH = 640  # batches of 32: about 17 epochs of the 1,200 training digits
BATCH_SIZE = 32
SPACE = """
hyperparameters:
  lr: {type: log, minval: -4, maxval: 0}
  momentum: {type: double, minval: 0.0, maxval: 0.95}
  hidden: {type: int, minval: 4, maxval: 128}
  weight_decay: {type: log, minval: -6, maxval: -1}
batches_per_step: 10
"""


@dataclass
class Data:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor


def load_data() -> Data:
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    x, y = x[order], y[order]
    mean, std = x[:1200].mean(0), x[:1200].std(0) + 1e-3
    x = (x - mean) / std
    return Data(x[:1200], y[:1200], x[1200:], y[1200:])


@dataclass
class Trial:
    """A live trial: its model, optimizer and batch stream, trained to `trained` batches."""

    hparams: dict[str, Any]
    model: nn.Module
    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    trained: int = 0
    targets: list[int] = field(default_factory=list)
    closing: bool = False
    closed: bool = False

    @classmethod
    def new(cls, hparams: dict[str, Any], seed: int) -> Trial:
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(64, hparams["hidden"]), nn.ReLU(), nn.Linear(hparams["hidden"], 10))
        optimizer = torch.optim.SGD(
            model.parameters(),
            lr=hparams["lr"],
            momentum=hparams["momentum"],
            weight_decay=hparams["weight_decay"],
        )
        return cls(hparams, model, optimizer, torch.Generator().manual_seed(seed))

    def copy_from(self, parent: Trial) -> None:
        """Start from the parent's checkpoint (weights, optimizer state, batch count); keep own hparams."""
        self.model.load_state_dict(copy.deepcopy(parent.model.state_dict()))
        self.optimizer.load_state_dict(copy.deepcopy(parent.optimizer.state_dict()))
        for group in self.optimizer.param_groups:
            group.update(
                lr=self.hparams["lr"],
                momentum=self.hparams["momentum"],
                weight_decay=self.hparams["weight_decay"],
            )
        self.trained = parent.trained

    def train_to(self, length: int, data: Data) -> None:
        self.model.train()
        loss_fn = nn.CrossEntropyLoss()
        while self.trained < length:
            idx = torch.randint(0, len(data.x_train), (BATCH_SIZE,), generator=self.generator)
            self.optimizer.zero_grad()
            loss = loss_fn(self.model(data.x_train[idx]), data.y_train[idx])
            if torch.isfinite(loss):
                loss.backward()
                self.optimizer.step()
            self.trained += 1

    def validation_error(self, data: Data) -> float:
        self.model.eval()
        with torch.no_grad():
            logits = self.model(data.x_val)
        if not torch.isfinite(logits).all():
            return 1.0
        return float((logits.argmax(1) != data.y_val).float().mean())


@dataclass
class Result:
    batches: int = 0
    best: float = 1.0
    trials: int = 0
    # (batches trained so far, best error so far) each time the best error improved.
    curve: list[tuple[int, float]] = field(default_factory=list)

    def batches_to(self, target: float) -> int | None:
        return next((batches for batches, error in self.curve if error <= target), None)


def run_search(searcher: SearchMethod, data: Data, order_seed: int) -> Result:
    """Plays the scheduler; which open trial runs next is drawn at random, as on a busy cluster."""
    trials: dict[str, Trial] = {}
    result = Result()
    order = random.Random(order_seed)

    def apply(ops: list[Any]) -> None:
        pending = list(ops)
        while pending:
            op = pending.pop(0)
            if isinstance(op, Create):
                trial = Trial.new(op.hparams, op.seed)
                if op.checkpoint_from is not None:
                    trial.copy_from(trials[op.checkpoint_from])
                trials[op.request_id] = trial
                result.trials += op.checkpoint_from is None
                pending.extend(searcher.on_trial_created(op.request_id))
            elif isinstance(op, Resume):  # a promotion: the same trial goes on where it stopped
                trials[op.request_id].closing = trials[op.request_id].closed = False
            elif isinstance(op, ValidateAfter):
                trials[op.request_id].targets.append(op.length)
            elif isinstance(op, Close):
                trials[op.request_id].closing = True
            elif isinstance(op, Shutdown):
                pass

    apply(searcher.initial_operations())
    while True:
        movable = sorted(r for r, t in trials.items() if not t.closed and (t.targets or t.closing))
        if not movable:
            break
        request_id = movable[order.randrange(len(movable))]
        trial = trials[request_id]
        if trial.targets:
            length = trial.targets.pop(0)
            before = trial.trained
            trial.train_to(length, data)
            result.batches += trial.trained - before
            error = trial.validation_error(data)
            if error < result.best:
                result.best = error
                result.curve.append((result.batches, error))
            apply(searcher.on_validation_completed(request_id, error, length))
        else:
            trial.closed = True  # kept: ASHA may resume it later (Resume)
            apply(searcher.on_trial_closed(request_id))
    return result


def make(searcher_yaml: str, seed: int) -> SearchMethod:
    config = parse_experiment_config(SPACE + f"searcher: {searcher_yaml}\n")
    return make_search_method(config, seed)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--target", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="one seed of 4 short trials: checks it runs")
    args = parser.parse_args()
    if args.smoke:
        args.seeds, args.trials = 1, 4
    torch.set_num_threads(2)
    torch.set_flush_denormal(True)  # diverging trials otherwise crawl through denormal arithmetic
    data = load_data()
    max_length = 160 if args.smoke else MAX_LENGTH
    common = f"metric: error, max_trials: {args.trials}, max_length: {max_length}"
    common += f", max_concurrent_trials: {args.concurrency}"
    searchers = {
        "random": "{name: random, " + common + "}",
        "asha": "{name: adaptive_asha, " + common + "}",
    }
    targets = sorted({args.target, 0.04, 0.035}, reverse=True)
    print(f"digits MLP, {args.trials} trials each, max length {max_length} batches of {BATCH_SIZE}")
    print("compute = batches trained until some trial first reported a validation error <= target")
    header = " ".join(f"{'<=' + format(t, 'g'):>8}" for t in targets)
    print(f"{'seed':>4} {'searcher':>8} {header} {'best':>6} {'total':>7} {'seconds':>7}")
    ratios: dict[float, list[float]] = {t: [] for t in targets}
    for seed in range(args.seeds):
        found: dict[str, Result] = {}
        for name, searcher_yaml in searchers.items():
            start = time.perf_counter()
            found[name] = result = run_search(make(searcher_yaml, seed), data, order_seed=seed)
            costs = " ".join(f"{str(result.batches_to(t) or 'never'):>8}" for t in targets)
            print(
                f"{seed:>4} {name:>8} {costs} {result.best:>6.3f} {result.batches:>7} "
                f"{time.perf_counter() - start:>7.1f}"
            )
        for t in targets:
            random_cost, asha_cost = found["random"].batches_to(t), found["asha"].batches_to(t)
            if random_cost and asha_cost:
                ratios[t].append(asha_cost / random_cost)
    print("ASHA's compute to reach the target, as a fraction of random search's (geometric mean):")
    for t in targets:
        if ratios[t]:
            geomean = math.exp(sum(math.log(r) for r in ratios[t]) / len(ratios[t]))
            print(f"  error <= {t:g}: {geomean:.2f} over {len(ratios[t])} of {args.seeds} seeds")
        else:
            print(f"  error <= {t:g}: not reached by both searchers")


if __name__ == "__main__":
    main()
