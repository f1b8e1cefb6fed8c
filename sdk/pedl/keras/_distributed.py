"""Keras trials on several slots: TensorFlow's MultiWorkerMirroredStrategy, one worker per rank.

The harness starts the strategy through the trial class's `start_workers` hook, after importing
the model definition and before any data or model exists: MultiWorkerMirroredStrategy configures
TensorFlow's collectives, which is refused once TensorFlow has run an op. Its TF_CONFIG lists every
rank's address (each rank picks a free port on its machine and the harness's rendezvous, the one
torch.distributed already uses, shares them) with this rank as its worker index.

Semantics across N workers (as for PyTorchTrial):
- The model is built and compiled under `strategy.scope()`: its variables are mirrored and start
  from worker 0's values, and the optimizer sums the gradients of all workers every batch (Keras
  scales each worker's loss by 1/N, so that is their mean).
- A "batch" is one batch on every worker: the data's batch size is per slot, so a step of B
  batches trains B * N batches in all (`num_batches` counts B, `num_inputs` every worker's samples).
- Each worker reads a disjoint shard of the batches (`pedl.keras._data.Shard`).
- Training metrics are averaged over the batches of every worker; validation metrics are Keras's
  metric states summed over every worker's shard, so they equal one process's pass over it all.
- Only the chief (worker 0) writes checkpoints; every worker restores them.

Collectives get no timeout: a worker may wait long and rightly for a peer (loading its data, a
longer validation shard). A worker that dies ends the run instead: the agent kills the trial's
other processes on its machine, and the scheduler the other machines' (`PEER_FAILED_EXIT_CODE`
tells a worker that only lost its peer apart). After TERMINATE the ranks leave together through
the harness's barrier and exit without interpreter teardown, so no collective is left pending.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import keras
import numpy as np
import tensorflow as tf

from pedl._metrics import to_plain
from pedl.harness.distributed import tf_config as tf_config  # re-exported: Keras trials' TF_CONFIG
from pedl.keras._data import Shard, unpack

if TYPE_CHECKING:
    from pedl.harness.distributed import ProcessGroup

TF_CONFIG = "TF_CONFIG"


@dataclass(frozen=True)
class Workers:
    """This process's place among the trial's workers, and their strategy."""

    strategy: Any  # tf.distribute.MultiWorkerMirroredStrategy
    index: int
    count: int

    @property
    def is_chief(self) -> bool:
        return self.index == 0

    @property
    def shard(self) -> Shard:
        return Shard(self.index, self.count)

    def sum(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """Element-wise sums over every worker (a collective: every worker must call it alike)."""
        local = tf.constant(np.asarray(values, dtype=np.float64).ravel())
        return np.asarray(self.strategy.reduce(tf.distribute.ReduceOp.SUM, local, axis=None).numpy())


_workers: Workers | None = None


def current() -> Workers | None:
    """The started workers, or None in a single process (no hook ran, or one slot)."""
    return _workers


def scope() -> contextlib.AbstractContextManager[Any]:
    """The strategy's scope when the trial runs on several workers, else a no-op."""
    return _workers.strategy.scope() if _workers is not None else contextlib.nullcontext()


def start(addresses: Sequence[str], index: int) -> Workers:
    """Sets TF_CONFIG and starts this process's MultiWorkerMirroredStrategy (once per process)."""
    global _workers
    if _workers is not None:
        raise RuntimeError("the Keras workers of this process are already started")
    os.environ[TF_CONFIG] = json.dumps(tf_config(addresses, index))
    try:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    except RuntimeError as exc:
        if "program startup" not in str(exc):
            raise
        raise RuntimeError(
            "a Keras trial on several slots runs under tf.distribute.MultiWorkerMirroredStrategy, which "
            "must start before TensorFlow runs any operation, but the model definition already ran "
            "one when imported: create data in make_data_loaders and the model in build_model"
        ) from exc
    if strategy.num_replicas_in_sync != len(addresses):
        raise RuntimeError(
            f"MultiWorkerMirroredStrategy has {strategy.num_replicas_in_sync} replicas for "
            f"{len(addresses)} workers: each rank must see one device (one GPU, or none)"
        )
    _workers = Workers(strategy, index, len(addresses))
    return _workers


def start_workers(group: ProcessGroup) -> None:
    """The harness's `start_workers` hook of Keras trial classes (see `pedl.harness.distributed`)."""
    start(group.worker_addresses(), group.launch.rank)


def check_model(model: keras.Model, workers: Workers, where: str) -> None:
    if model.distribute_strategy is not workers.strategy:
        raise ValueError(
            f"{where}: the model was not created under the trial's MultiWorkerMirroredStrategy "
            "(it runs on several slots); create and compile it where PEDL asks for it, not earlier"
        )


class Steps:
    """Training and validation steps of a model on several workers.

    Keras 3's own step functions reduce every metric across workers with a reduction that fails
    on scalars under MultiWorkerMirroredStrategy, so the model gets these: each worker's step
    returns its own batch's metrics (the gradients are still all-reduced by the optimizer), and
    PEDL reduces across workers itself, once per workload.
    """

    def __init__(self, model: keras.Model, workers: Workers) -> None:
        self.model = model
        self.workers = workers
        strategy = workers.strategy

        def train(data: Any) -> Any:
            return strategy.run(model.train_step, args=(data,))

        def test(data: Any) -> None:
            strategy.run(model.test_step, args=(data,))

        if not model.run_eagerly:
            # Not XLA-compiled (as Keras does by default): XLA has no collectives on CPUs.
            train = tf.function(train, reduce_retracing=True)
            test = tf.function(test, reduce_retracing=True)
        self._test = test
        # model.train_on_batch runs model.train_function on an iterator over its one batch.
        model.train_function = lambda iterator: train(next(iterator))

    def build(self, sample: Any) -> None:
        """Creates the optimizer and metric variables from a sample batch (or its TensorSpecs), so
        that every worker has the same distributed variables before the first collective that
        reads them (Keras's train_on_batch builds the same way, only later)."""
        self.model._maybe_symbolic_build(data_batch=unpack(sample))

    def validate(self, batches: Iterable[Any]) -> dict[str, Any]:
        """The compiled metrics over every worker's `batches` (each worker may have a different
        number): metric states accumulate locally, then reading them sums them over workers."""
        model = self.model
        model.reset_metrics()
        count = 0
        for batch in batches:
            self._test(unpack(batch))
            count += 1
        if self.workers.sum([count])[0] == 0:
            raise RuntimeError("the validation data produced no batches on any worker")
        return {name: to_plain(np.asarray(value)) for name, value in model.get_metrics_result().items()}

    def mean_step(self, metrics: dict[str, Any], num_inputs: int) -> tuple[dict[str, Any], int]:
        """(the step's metric means over every worker, every worker's inputs): each worker trained
        as many batches, so the mean of their means is the mean over all batches."""
        names = sorted(metrics)
        arrays = [np.asarray(metrics[name], dtype=np.float64) for name in names]
        flat = np.concatenate([a.ravel() for a in arrays] + [np.asarray([num_inputs], dtype=np.float64)])
        totals = self.workers.sum(flat)
        out: dict[str, Any] = {}
        at = 0
        for name, array in zip(names, arrays, strict=True):
            out[name] = to_plain((totals[at : at + array.size] / self.workers.count).reshape(array.shape))
            at += array.size
        return out, int(totals[-1])
