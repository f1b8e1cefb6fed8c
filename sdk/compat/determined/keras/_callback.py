"""Determined 0.38's Keras API: `det.keras.DeterminedCallback`, which makes a script's own
`model.fit()` a trial (it reports metrics and progress, stores and restores checkpoints, and stops
fit when the trial is preempted or its searcher is done), and `det.keras.TensorBoard`.

What Determined documents, as pedl does it:
- Training metrics are reported every epoch (`train_metrics_report_period="epoch"`, Keras's epoch
  logs without the `val_` entries) or every N batches (an int: that batch's logs); each report
  carries `epochs` and `batches`, at steps_completed = batches trained.
- Validation metrics are reported when Keras's evaluation inside fit (or a user's `evaluate`)
  ends, under the names Keras's `on_test_end` gives them (`loss`, `categorical_accuracy`), as
  Determined's callback reports them (0.38's adaptive.yaml searches on `categorical_accuracy`), and,
  inside fit, also under fit's `val_` names (`val_categorical_accuracy`, which 0.38's const.yaml
  names and pedl's Keras trials report), with `epochs` and `batches`.
- Progress is epochs done / fit's `epochs`.
- A checkpoint is stored every `checkpoint_epochs` epochs (0: never on a schedule), and always when
  fit ends with epochs not yet stored (its end, or a preemption). It holds the weights at
  `model_checkpoint` (Keras 2's TensorFlow format; under Keras 3, which writes only `.weights.h5`,
  `model_checkpoint.weights.h5`) and the callback's state (`callback_state.json`).
- Preemption (a pause, or the searcher stopping the trial) is checked at every epoch end, after the
  epoch's checkpoint; fit then stops, and the end-of-fit checkpoint holds its last epoch.
- `checkpoint` (a storage id) restores the weights; if the checkpoint's `continue_id` equals this
  one, fit also continues from the epoch after the stored one (fit's own `initial_epoch` is
  overridden), else it starts at epoch 0 (a warm start).
- `save_model(model, path, distributed)` / `load_model(...)` may be overridden. Under
  MultiWorkerMirroredStrategy every worker must write the weights: the chief into the checkpoint,
  the others into a directory that is removed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import keras

logger = logging.getLogger("determined.keras")

STATE_FILE = "callback_state.json"
WEIGHTS = "model_checkpoint"
_KERAS3 = int(keras.__version__.split(".")[0]) >= 3
_NOT_METRICS = ("batch", "size")


def _plain(logs: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in (logs or {}).items():
        if name in _NOT_METRICS:
            continue
        try:
            out[name] = float(value)
        except (TypeError, ValueError):
            out[name] = value
    return out


def _weights_file(path: str) -> str:
    return path + ".weights.h5" if _KERAS3 else path


class _StartAt:
    """Keras 2's hook for where fit starts (what its BackupAndRestore callback sets)."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def maybe_load_initial_epoch_from_ckpt(self, *_: Any, **__: Any) -> int:
        return self.epoch

    def maybe_load_initial_counters_from_ckpt(self, *_: Any, **__: Any) -> tuple[int, int]:
        return self.epoch, 0


class DeterminedCallback(keras.callbacks.ProgbarLogger):
    """Add it to `model.fit(callbacks=[...])`; see the module docstring. A ProgbarLogger, so that
    Keras adds no progress bar of its own: with verbose fit it logs a line per epoch instead."""

    def __init__(
        self,
        core_context: Any,
        checkpoint: str | None,
        continue_id: int | str,
        *,
        train_metrics_report_period: int | str = "epoch",
        checkpoint_epochs: int = 1,
    ) -> None:
        keras.callbacks.Callback.__init__(self)
        period = train_metrics_report_period
        if period != "epoch" and (isinstance(period, bool) or not isinstance(period, int) or period < 1):
            raise ValueError(
                f"DeterminedCallback(train_metrics_report_period={period!r}): use 'epoch' or a "
                "positive number of batches"
            )
        if (
            isinstance(checkpoint_epochs, bool)
            or not isinstance(checkpoint_epochs, int)
            or checkpoint_epochs < 0
        ):
            raise ValueError(
                f"DeterminedCallback(checkpoint_epochs={checkpoint_epochs!r}): use 0 (only at the end "
                "and on preemption) or a positive number of epochs"
            )
        if checkpoint is not None and not isinstance(checkpoint, str):
            raise ValueError(f"DeterminedCallback(checkpoint={checkpoint!r}): use a storage id or None")
        self._core = core_context
        self._checkpoint = checkpoint
        self._continue_id = continue_id
        self._period = period
        self._checkpoint_epochs = checkpoint_epochs
        self._chief = core_context.distributed.rank == 0
        self._verbose = False
        self._steps_completed = 0
        self._epoch = 0
        self._last_trained = -1
        self._last_stored = -1
        # The restored checkpoint's directory: Keras 2 reads the optimizer's part only when the
        # first batch creates its variables, so it is removed after that batch.
        self._restored: contextlib.ExitStack | None = None
        self._fitting = False

    # ProgbarLogger's behaviour is not wanted: only its type is (see the class docstring).
    def set_params(self, params: dict[str, Any]) -> None:
        keras.callbacks.Callback.set_params(self, params)
        self._verbose = bool(params.get("verbose", 0))

    def _implements_train_batch_hooks(self) -> bool:
        return True

    def _implements_test_batch_hooks(self) -> bool:
        return False

    def _implements_predict_batch_hooks(self) -> bool:
        return False

    def on_predict_begin(self, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_predict_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_predict_end(self, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_test_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        pass

    # --- training ---------------------------------------------------------------------------

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._fitting = True
        if self._checkpoint is not None:
            self._restore(self._checkpoint)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._steps_completed += 1
        self._release_restored()
        if self._chief and self._period != "epoch" and self._steps_completed % int(self._period) == 0:
            self._report("training", _plain(logs), self._epoch + 1)

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._chief:
            metrics = _plain(logs)
            if self._fitting:
                metrics.update({f"val_{name}": value for name, value in list(metrics.items())})
            self._report("validation", metrics, self._epoch + 1)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        metrics = {k: v for k, v in _plain(logs).items() if not k.startswith("val_")}
        if self._chief and self._period == "epoch":
            self._report("training", metrics, epoch + 1)
        epochs = self.params.get("epochs") if self.params else None
        if self._chief and epochs:
            self._core.train.report_progress(min((epoch + 1) / epochs, 1.0))
        if self._chief and self._verbose:
            print(
                f"epoch {epoch + 1}/{epochs}, batches trained: {self._steps_completed}: {metrics}", flush=True
            )
        self._last_trained = epoch
        if self._checkpoint_epochs and (epoch + 1) % self._checkpoint_epochs == 0:
            self._store(epoch)
        if self._core.preempt.should_preempt():
            self.model.stop_training = True

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self._fitting = False
        self._release_restored()
        if self._last_trained > self._last_stored:
            self._store(self._last_trained)
        if _KERAS3:
            self.model._initial_epoch = None
        else:
            self.model._training_state = None

    def _report(self, group: str, metrics: dict[str, Any], epochs: int) -> None:
        metrics.setdefault("epochs", epochs)
        metrics.setdefault("batches", self._steps_completed)
        self._core.train.report_metrics(group, self._steps_completed, metrics)

    # --- checkpoints ------------------------------------------------------------------------

    def _store(self, epoch: int) -> None:
        if self._chief:
            with self._core.checkpoint.store_path({"steps_completed": self._steps_completed}) as (path, _):
                self.save_model(self.model, str(path / WEIGHTS), self._core.distributed)
                state = {
                    "epoch": epoch,
                    "steps_completed": self._steps_completed,
                    "continue_id": self._continue_id,
                }
                (path / STATE_FILE).write_text(json.dumps(state))
        else:
            self.save_model(self.model, "", self._core.distributed)
        self._last_stored = epoch

    def _release_restored(self) -> None:
        if self._restored is not None:
            self._restored.close()
            self._restored = None

    def _restore(self, storage_id: str) -> None:
        with contextlib.ExitStack() as stack:
            path = Path(stack.enter_context(self._core.checkpoint.restore_path(storage_id)))
            self.load_model(self.model, str(path / WEIGHTS), self._core.distributed)
            state_file = path / STATE_FILE
            state = json.loads(state_file.read_text()) if state_file.exists() else None
            self._restored = stack.pop_all()
        if state is None or state.get("continue_id") != self._continue_id:
            logger.info("checkpoint %s: weights loaded; training starts at epoch 0", storage_id)
            return
        self._steps_completed = int(state["steps_completed"])
        start = int(state["epoch"]) + 1
        self._last_trained = self._last_stored = start - 1
        if _KERAS3:
            self.model._initial_epoch = start
        else:
            self.model._training_state = _StartAt(start)
        logger.info("checkpoint %s: training continues at epoch %d", storage_id, start)

    def save_model(self, model: Any, path: str, distributed: Any) -> None:
        """Writes the weights to `path` (the chief's; other ranks also write, to a directory then
        removed, as MultiWorkerMirroredStrategy needs). Override to save otherwise."""
        if distributed.rank == 0:
            model.save_weights(_weights_file(path))
            return
        scratch = tempfile.mkdtemp(prefix="det-keras-worker-")
        try:
            model.save_weights(_weights_file(os.path.join(scratch, WEIGHTS)))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def load_model(self, model: Any, path: str, distributed: Any) -> None:
        """Reads the weights `save_model` wrote at `path`. Override to load otherwise."""
        model.load_weights(_weights_file(path))


class TensorBoard(keras.callbacks.TensorBoard):
    """Keras's TensorBoard callback writing into the trial's TensorBoard directory (a `log_dir`
    given is ignored there, with a warning); `pedl tensorboard EXPERIMENT_ID` shows what it writes
    beside the reported metrics. Off a cluster `log_dir` is used as given."""

    def __init__(self, core_context: Any, *args: Any, **kwargs: Any) -> None:
        on_cluster = core_context.info is not None
        if on_cluster:
            given = kwargs.pop("log_dir", None)
            if args:
                given, args = args[0], args[1:]
            if given is not None:
                logger.warning("det.keras.TensorBoard(log_dir=%r) is ignored on a cluster", given)
            kwargs["log_dir"] = str(core_context.train.get_tensorboard_path())
        super().__init__(*args, **kwargs)
