"""pedl's controller for DeepSpeedTrial: micro-batches in, DeepSpeed's own checkpoints out.

Data: each slot reads its shard of the trial's loaders (pedl's round-robin shards, the same as for
PyTorchTrial), through a stream whose position a checkpoint restores. Checkpoints: every engine
writes `save_checkpoint(dir, tag="model{i}")` on every rank (ZeRO stages write one optimizer
partition per rank); the ranks' files are gathered into the chief's directory, which is the one
pedl stores, so that a restore on any number of machines finds every partition.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from determined.pytorch._evaluation import evaluation_reducers
from determined.pytorch._reducer import Reducer
from pedl._metrics import to_plain
from pedl.harness.controller import StepResult
from pedl.pytorch import _distributed, _rng
from pedl.pytorch._averaging import MetricAverager, first_non_finite
from pedl.pytorch._data import batch_length
from pedl.pytorch._stream import EpochStream

STATE_FILE = "pedl_deepspeed_state.pt"
SHM_COMM_OP = "deepspeed_shm_comm"


def skip_shm_comm_op() -> None:
    """Marks DeepSpeed's shared-memory all-reduce op incompatible, so that `init_distributed()` does
    not JIT-compile it (a C++ build of minutes, on every fresh machine, before the first step).
    DeepSpeed then all-reduces through torch.distributed's backend (gloo on CPUs), as it does
    wherever the op cannot be built; its result is the same."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__[SHM_COMM_OP] = False


class _Micro(Iterator[Any]):
    """The iterator train_batch draws micro-batches from: the training stream, counted."""

    def __init__(self, stream: EpochStream) -> None:
        self._stream = stream
        self.drawn = 0
        self.inputs = 0

    def __next__(self) -> Any:
        batch = self._stream.next()
        self.drawn += 1
        try:
            self.inputs += batch_length(batch)
        except TypeError:
            pass
        return batch


class DeepSpeedController:
    """Implements pedl's TrialController for a DeepSpeedTrial and its context's engines."""

    def __init__(self, trial: Any, context: Any, training: Any, validation: Any) -> None:
        self.trial = trial
        self.context = context
        self._ranks = _distributed.current()
        if self._ranks is not None:
            training = _distributed.shard_loader(training, self._ranks, pad=True)
            validation = _distributed.shard_loader(validation, self._ranks, pad=False)
        self.training_loader = training
        self._stream = EpochStream(training)
        self.validation_loader = validation
        self._batches_trained = 0
        context._batches_trained = lambda: self._batches_trained
        context._epoch = lambda: self._stream.epoch
        context._epoch_len = self.batches_per_epoch

    def batches_per_epoch(self) -> int:
        """Batches (optimizer steps) in one pass over this slot's training shard, as Determined counts
        them: its micro-batches over those of one batch."""
        return max(1, len(self.training_loader) // self.context.num_micro_batches_per_slot)

    @property
    def batches_trained(self) -> int:
        return self._batches_trained

    def _averager(self, what: str) -> MetricAverager:
        return MetricAverager(what) if self._ranks is None else _distributed.ShardAverager(what)

    def _reduce(self, averager: MetricAverager, extra: int = 0) -> tuple[dict[str, Any], int, int]:
        if self._ranks is None:
            return averager.result(), averager.batches, extra
        assert isinstance(averager, _distributed.ShardAverager)
        metrics, batches, extras = _distributed.reduce_means(self._ranks, averager.sums(), extra)
        return metrics, batches, sum(extras)

    def train_until(self, total_batches: int) -> StepResult:
        count = total_batches - self._batches_trained
        if count <= 0:
            return StepResult()
        for engine in self.context.models:
            engine.train()
        self.context.reducers.reset(training=True)
        averager = self._averager("train_batch()")
        micro = _Micro(self._stream)
        calls = self.context.num_micro_batches_per_slot if self.context._auto_grad_accumulation else 1
        for _ in range(count):
            batch_idx = self._batches_trained
            self.context._current_batch_idx = batch_idx
            for _ in range(calls):
                out = self._train_batch(micro, batch_idx)
                # Any metrics, as Determined takes them (its DCGAN reports errD and errG, no loss).
                averager.add(_metrics(out, f"{type(self.trial).__qualname__}.train_batch()"))
            self._batches_trained += 1
        metrics, _, inputs = self._reduce(averager, micro.inputs)
        if "loss" in metrics:
            loss = torch.as_tensor(metrics["loss"], dtype=torch.float64).reshape(-1)
            if first_non_finite(loss) is not None:
                raise FloatingPointError(f"training batch {total_batches}: the loss is {metrics['loss']}")
        metrics.update(self.context.reducers.metrics(training=True))
        return StepResult(metrics=metrics, num_batches=count, num_inputs=inputs)

    def _train_batch(self, micro: _Micro, batch_idx: int) -> Any:
        """One train_batch call, inside the context's profiler (set_profiler) if it has one."""
        profiler = self.context.profiler
        if profiler is None:
            return self.trial.train_batch(micro, self._stream.epoch, batch_idx)
        with profiler:
            out = self.trial.train_batch(micro, self._stream.epoch, batch_idx)
            profiler.step()
        return out

    def validate(self) -> dict[str, Any]:
        """Means of evaluate_batch's metrics over every rank's batches (or evaluate_full_dataset's
        means over ranks), plus the wrapped reducers' metrics."""
        saved = _rng.capture()
        for engine in self.context.models:
            engine.eval()
        self.context.reducers.reset(training=False)
        averager = self._averager("evaluate_batch()")
        try:
            with torch.no_grad():
                if callable(getattr(self.trial, "evaluate_batch", None)):
                    self._evaluate_batches(averager)
                else:
                    averager.add(self.trial.evaluate_full_dataset(self.validation_loader))
        finally:
            for engine in self.context.models:
                engine.train()
            _rng.restore(saved)
        metrics, batches, _ = self._reduce(averager)
        if batches == 0:
            raise RuntimeError("the validation data loader produced no batches")
        metrics.update(self.context.reducers.metrics(training=False))
        return metrics

    def _evaluate_batches(self, averager: MetricAverager) -> None:
        chosen = evaluation_reducers(self.trial)
        if any(r is not Reducer.AVG for r in chosen.values()):
            raise TypeError(
                f"{type(self.trial).__qualname__}.evaluation_reducer(): pedl averages a DeepSpeedTrial's "
                "evaluate_batch metrics; use context.wrap_reducer() for sums, maxima or minima"
            )
        # One call per validation micro-batch (without pipeline parallelism an engine evaluates one
        # at a time); a trial that draws several per call ends the pass when the loader is spent.
        iterator = iter(self.validation_loader)
        for index in range(len(self.validation_loader)):
            try:
                out = self.trial.evaluate_batch(iterator, index)
            except StopIteration:
                break
            averager.add(_metrics(out, "evaluate_batch()"))

    # --- checkpoints ------------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Every rank calls it (DeepSpeed's save is collective); the chief's directory gets all files."""
        path = Path(path)
        for i, engine in enumerate(self.context.models):
            engine.save_checkpoint(str(path), tag=f"model{i}")
        own = {"rng": _rng.capture(), "data_position": self._stream.state()}
        ranks = self._ranks
        if ranks is not None:
            files = _files(path) if not ranks.is_chief else {}
            gathered: list[Any] = [None] * ranks.world_size if ranks.is_chief else []
            dist.gather_object((own, files), gathered if ranks.is_chief else None, dst=0, group=ranks.group)
            if not ranks.is_chief:
                return
            for _, rank_files in gathered:
                for rel, data in rank_files.items():
                    target = path / rel
                    if not target.exists():
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(data)
            per_rank = [state for state, _ in gathered]
        else:
            per_rank = [own]
        torch.save({"batches_trained": self._batches_trained, "ranks": per_rank}, path / STATE_FILE)

    def load(self, path: Path) -> None:
        state = self._load_engines(Path(path))
        self._batches_trained = int(state["batches_trained"])
        self.context._initial_batch = self._batches_trained
        per_rank = state["ranks"]
        rank = 0 if self._ranks is None else self._ranks.rank
        # A checkpoint of as many ranks gives each rank its own states; otherwise all take the chief's.
        own = (
            per_rank[rank]
            if len(per_rank) == (1 if self._ranks is None else self._ranks.world_size)
            else per_rank[0]
        )
        self._stream.restore(own["data_position"])
        _rng.restore(own["rng"])

    def warm_start(self, path: Path) -> None:
        """The engines' weights and optimizer states; batch 0, this trial's own data and RNG."""
        self._load_engines(Path(path))

    def _load_engines(self, path: Path) -> dict[str, Any]:
        if not (path / STATE_FILE).exists():
            raise ValueError(f"{path} is not a DeepSpeedTrial checkpoint (it has no {STATE_FILE})")
        for i, engine in enumerate(self.context.models):
            loaded, _ = engine.load_checkpoint(str(path), tag=f"model{i}")
            if loaded is None:
                raise ValueError(f"DeepSpeed found no checkpoint of engine {i} under {path}/model{i}")
        return dict(torch.load(path / STATE_FILE, weights_only=False))


def _files(path: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for root, _, names in os.walk(path):
        for name in names:
            full = Path(root) / name
            out[str(full.relative_to(path))] = full.read_bytes()
    return out


def _metrics(out: Any, what: str) -> dict[str, Any]:
    if isinstance(out, torch.Tensor):
        return {"loss": out.detach()}
    if not isinstance(out, dict):
        raise TypeError(
            f"{what} must return a dict of metrics (or the loss tensor), got {type(out).__name__}"
        )
    return {k: to_plain(v) if not isinstance(v, torch.Tensor) else v.detach() for k, v in out.items()}
