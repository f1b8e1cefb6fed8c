"""The TensorBoard callback of Keras trials (Determined's `det.keras.callbacks.TensorBoard`, its older
name `det.keras.TFKerasTensorBoard`, and PEDL 0.11's `pedl.frameworks.keras.TFKerasTensorBoard`).

pedl trains batch by batch and runs no Keras callbacks. What this callback shows in Determined
(the trial's training and validation metric curves) pedl's TensorBoard support writes from the
metrics every trial reports: `pedl tensorboard EXPERIMENT_ID` (also `det tensorboard start`) writes
event files with one `training` and one `validation` run per trial, the step axis counting batches.
Weight histograms (`histogram_freq=N`) Keras writes itself: the callback is Keras's own
TensorBoard, its log directory the run's TensorBoard directory (as Determined puts it in
/tmp/tensorboard, whatever `log_dir` says), and after every Nth validation (pedl's epoch: Keras's
`on_epoch_end` with the validation's index) Keras logs each weight's histogram under the `train`
run; the harness uploads them and `pedl tensorboard` shows them beside the metric curves. The
options that ask for more (images, embeddings, profiling) are refused with one line naming the
option, and the model graph, which pedl does not write, is named in a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import keras

logger = logging.getLogger("pedl.keras")


class TensorBoard(keras.callbacks.TensorBoard):
    """Accepts tf.keras.callbacks.TensorBoard's arguments; see the module docstring."""

    def __init__(
        self,
        log_dir: str = "logs",
        histogram_freq: int = 0,
        write_graph: bool = True,
        write_images: bool = False,
        write_steps_per_second: bool = False,
        update_freq: str | int = "epoch",
        profile_batch: int | tuple[int, int] | str = 0,
        embeddings_freq: int = 0,
        embeddings_metadata: Any = None,
        **kwargs: Any,
    ) -> None:
        refused = {
            "write_images": bool(write_images),
            "write_steps_per_second": bool(write_steps_per_second),
            "profile_batch": profile_batch not in (0, None, (0, 0), "0", "0,0"),
            "embeddings_freq": embeddings_freq not in (0, None),
            "embeddings_metadata": embeddings_metadata is not None,
        }
        values = {
            "write_images": write_images,
            "write_steps_per_second": write_steps_per_second,
            "profile_batch": profile_batch,
            "embeddings_freq": embeddings_freq,
            "embeddings_metadata": embeddings_metadata,
            **kwargs,
        }
        names = [name for name, bad in refused.items() if bad] + sorted(kwargs)
        if names:
            listed = ", ".join(f"{name}={values[name]!r}" for name in names)
            raise ValueError(
                f"TensorBoard({listed}): pedl's TensorBoard shows the metrics each trial reports "
                "(`pedl tensorboard EXPERIMENT_ID`) and Keras's weight histograms (histogram_freq), "
                "not images, embeddings or profiles; leave these out"
            )
        if not isinstance(update_freq, int) and update_freq not in ("epoch", "batch"):
            raise ValueError(f"TensorBoard(update_freq={update_freq!r}): use 'epoch', 'batch' or an int")
        if not isinstance(histogram_freq, int) or histogram_freq < 0:
            raise ValueError(f"TensorBoard(histogram_freq={histogram_freq!r}): use 0 or a positive int")
        # Keras's own graph option writes a model summary at set_model; pedl writes neither.
        super().__init__(
            log_dir=log_dir, histogram_freq=histogram_freq, write_graph=False, update_freq=update_freq
        )
        self.asks_for_graph = bool(write_graph)
        self._validations = 0

    def attach(self, model: keras.Model) -> None:
        """Points Keras's writers at the run's TensorBoard directory, for `model`."""
        from pedl.harness.tensorboard_sync import tensorboard_dir

        self.log_dir = str(tensorboard_dir())
        self.set_model(model)

    def after_validation(self) -> None:
        """One validation ended: Keras's epoch end, where it logs the weights' histograms
        (every `histogram_freq` epochs) and, with no logs given, no metrics (pedl writes those)."""
        if self.histogram_freq:
            self.on_epoch_end(self._validations, logs=None)
        self._validations += 1


def check_callbacks(callbacks: Any, where: str) -> list[TensorBoard]:
    """The trial's TensorBoard callbacks; raises for callbacks pedl cannot honour (`where` names the
    trial's keras_callbacks method)."""
    if callbacks is None:
        return []
    if not isinstance(callbacks, Sequence) or isinstance(callbacks, (str, bytes)):
        raise TypeError(f"{where} must return a list of callbacks, got {type(callbacks).__name__}")
    others = [type(c).__name__ for c in callbacks if not isinstance(c, TensorBoard)]
    if others:
        raise TypeError(
            f"{where} returned callbacks ({', '.join(others)}); pedl trains batch by batch and does not run "
            "Keras callbacks other than TensorBoard (report metrics from the compiled model instead)"
        )
    if any(c.asks_for_graph for c in callbacks):
        logger.warning(
            "%s: TensorBoard(write_graph=True): pedl's TensorBoard shows the trial's training and "
            "validation metrics (pedl tensorboard EXPERIMENT_ID); it does not write the model graph",
            where,
        )
    return list(callbacks)
