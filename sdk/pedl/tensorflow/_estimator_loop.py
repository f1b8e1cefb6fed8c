"""The one long-lived `Estimator.train()` call an EstimatorTrial runs in, and the hook that steers it.

The harness drives a trial through calls (`train_until`, `validate`, `save`); the Estimator drives
its own loop inside `train()`. So `train()` runs on a worker thread of its own, and `ControlHook`
hands control to the harness between steps: after the step's last batch it answers the pending
`train_until` and waits for the next command. A validation is done from inside the hook (the
session saves a checkpoint into `model_dir`, `Estimator.evaluate` reads it in a graph of its own),
so the training graph is built and its session opened once per train call, not once per step.

A checkpoint ends the call (`request_stop`): the next step opens a new one, from a freshly built
Estimator. Ending there is what makes a resumed trial exact: stateful random ops (dropout, for
one) restart their streams with every session, so a run resumed from a checkpoint and the run that
went on past it both draw from fresh streams from that checkpoint on. A fresh Estimator is what lets
any optimizer form work: an optimizer instance given to a premade Estimator refuses a second graph.

Every TensorFlow call happens on the worker thread, so TensorFlow's per-thread graph stack is never
shared; the caller only waits for the command's answer.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from pedl.harness.controller import StepResult


@dataclass
class Command:
    """One request to the worker: "train" (to `target` batches), "validate", "save" or "stop"."""

    kind: str
    target: int = 0
    path: Any = None
    done: Future = field(default_factory=Future)


class ControlHook(tf.compat.v1.train.SessionRunHook):
    """Counts and reports batches; at a step's end answers it and serves commands until the next step.

    `serve_between_steps(hook, command)` runs a validate command inside the call (the session is open);
    a "save" or "stop" command ends the call and is left in `ending` for the worker to finish."""

    def __init__(
        self,
        first: Command,
        batches_trained: int,
        commands: queue.Queue[Command],
        evaluate: Callable[[str], dict[str, Any]],
        model_dir: str,
    ) -> None:
        self.pending: Command | None = first
        self.batches_trained = batches_trained
        self.ending: Command | None = None
        self._target = first.target
        self._first_batch = batches_trained
        self._commands = commands
        self._evaluate = evaluate
        self._model_dir = model_dir
        self._losses: list[float] = []
        self._loss: Any = None
        self._saver: Any = None
        self._global_step: Any = None
        self._session: Any = None

    def begin(self) -> None:
        graph = tf.compat.v1.get_default_graph()
        for summary in graph.get_collection(tf.compat.v1.GraphKeys.SUMMARIES):
            if summary.op.name == "loss":
                self._loss = summary.op.inputs[1]
        if self._loss is None:
            raise RuntimeError("the Estimator's training graph has no 'loss' summary to report the loss from")
        self._global_step = tf.compat.v1.train.get_global_step()
        # The Estimator puts its checkpoint saver in this collection before hooks begin; a model_fn
        # whose scaffold brings its own saver leaves it empty, and then the hook saves with its own.
        savers = graph.get_collection(tf.compat.v1.GraphKeys.SAVERS)
        self._saver = savers[0] if savers else tf.compat.v1.train.Saver(sharded=True)

    def after_create_session(self, session: Any, coord: Any) -> None:
        self._session = session

    def before_run(self, run_context: Any) -> Any:
        return tf.compat.v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self._losses.append(float(run_values.results))
        self.batches_trained += 1
        if self.batches_trained < self._target:
            return
        self._answer_step()
        while True:
            command = self._commands.get()
            if command.kind == "train":
                if command.target <= self.batches_trained:
                    command.done.set_result(StepResult())
                    continue
                self.pending, self._target, self._losses = command, command.target, []
                self._first_batch = self.batches_trained
                return
            if command.kind == "validate":
                try:
                    command.done.set_result(self._evaluate(self.save_checkpoint()))
                except Exception as exc:  # the validation fails, the call stays usable
                    command.done.set_exception(exc)
                continue
            self.ending = command  # "save" or "stop": the worker finishes it once train() returns
            run_context.request_stop()
            return

    def end(self, session: Any) -> None:
        if self.ending is not None and self.ending.kind == "save":
            self.save_checkpoint()

    def save_checkpoint(self) -> str:
        """Writes the session's variables into model_dir (the Estimator's own naming); returns the path."""
        step = int(self._session.run(self._global_step))
        latest = tf.train.latest_checkpoint(self._model_dir)
        if latest is not None and latest.endswith(f"-{step}"):
            return latest
        return str(self._saver.save(self._session, f"{self._model_dir}/model.ckpt", global_step=step))

    def _answer_step(self) -> None:
        loss = float(np.mean(self._losses))
        if not np.isfinite(loss):  # raised out of train(): the worker fails the pending step with it
            raise FloatingPointError(
                f"training batches {self._first_batch + 1}-{self.batches_trained}: the mean loss is {loss}"
            )
        command, self.pending = self.pending, None
        assert command is not None
        count = self.batches_trained - self._first_batch
        command.done.set_result(StepResult(metrics={"loss": loss}, num_batches=count))


class Worker:
    """The thread all of a controller's TensorFlow work runs on; `call` hands it one command."""

    def __init__(self, serve: Callable[[queue.Queue[Command]], None]) -> None:
        self.commands: queue.Queue[Command] = queue.Queue()
        # A daemon: a harness that exits without `close` (an error) must not wait for it.
        self._thread = threading.Thread(
            target=serve, args=(self.commands,), name="pedl-estimator-train", daemon=True
        )
        self._thread.start()

    def call(self, kind: str, target: int = 0, path: Any = None) -> Any:
        if not self._thread.is_alive():
            raise RuntimeError("the EstimatorTrial's training thread has ended")
        command = Command(kind, target, path)
        self.commands.put(command)
        return command.done.result()

    def close(self) -> None:
        if self._thread.is_alive():
            self.call("stop")
            self._thread.join()
