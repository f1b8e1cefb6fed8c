"""Two Keras 2 spellings that Determined's and PEDL's published Keras trials use (every
`iris_tf_keras` from PEDL 0.11 to Determined 0.20), which Keras 3 reads otherwise:

- an optimizer's learning rate as `lr=` (`RMSprop(lr=...)`): Keras 2 took it with a deprecation
  warning, Keras 3 refuses it ("Argument(s) not recognized"); pedl passes it as `learning_rate`;
- `model.compile(optimizer, loss, [metrics])` with the metrics third: Keras 2's order, where Keras 3
  has `loss_weights`; a third positional argument that is a list of metrics (callables, Metric
  objects or names, never the numbers loss weights are) is passed as `metrics`.

Before a Determined or PEDL 0.11 Keras trial builds its model, pedl patches Keras 3 for both, once
per process. An optimizer from `tf.keras.optimizers.legacy` (Keras 2's old implementation) stays
refused by Keras 3.

Keras 2.11 to 2.15 (TensorFlow 2.12's and 2.15's environments) read both spellings of the compile
call, but their `tf.keras.optimizers` are a newer implementation than the one code written for
TensorFlow 2.10 and older called: it refuses `decay=` ("use the legacy optimizer") and ignores
`lr=` with a warning (training at the default rate). Given either (Determined 0.12 to 0.20's
`RMSprop(lr=..., decay=...)`), pedl builds the optimizer of that name in `tf.keras.optimizers.legacy`:
the implementation those TensorFlow versions had under `tf.keras.optimizers`."""

from __future__ import annotations

import functools
import warnings
from typing import Any

_accepted = False


def accept_keras2_spellings() -> None:
    """Idempotent; patches Keras 3's optimizer base class once per process."""
    global _accepted
    if _accepted:
        return
    import keras

    if int(keras.__version__.split(".")[0]) < 3:  # Keras 2 (TensorFlow <= 2.15) reads both itself
        _build_legacy_optimizers_for_legacy_arguments()
        _accepted = True
        return
    from keras.src.optimizers import base_optimizer

    original = base_optimizer.BaseOptimizer.__init__

    @functools.wraps(original)
    def init(self: Any, learning_rate: Any, *args: Any, **kwargs: Any) -> None:
        if "lr" in kwargs:
            learning_rate = kwargs.pop("lr")
            warnings.warn(
                "The `lr` argument is deprecated (Keras 2's spelling); pedl passes it as `learning_rate`",
                DeprecationWarning,
                stacklevel=3,
            )
        original(self, learning_rate, *args, **kwargs)

    base_optimizer.BaseOptimizer.__init__ = init
    _accept_metrics_third()
    _accepted = True


def _build_legacy_optimizers_for_legacy_arguments() -> None:
    """Keras 2.11 to 2.15: `tf.keras.optimizers.X(lr=..., decay=...)` builds
    `tf.keras.optimizers.legacy.X` (see the module docstring); Keras 2.10 and older have no legacy
    namespace and read both themselves."""
    import tensorflow as tf

    legacy = getattr(tf.keras.optimizers, "legacy", None)
    if legacy is None:
        return
    base = tf.keras.optimizers.Optimizer
    original = base.__new__

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        old = getattr(legacy, cls.__name__, None)
        # (a legacy class that is this base's own, as in Keras 2.10, is never swapped for itself)
        if isinstance(old, type) and not issubclass(old, base) and ("decay" in kwargs or "lr" in kwargs):
            return old(*args, **kwargs)
        return original(cls) if original is object.__new__ else original(cls, *args, **kwargs)

    base.__new__ = new


def _is_metrics_list(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(v, str) or callable(v) for v in value)
    )


def _accept_metrics_third() -> None:
    from keras.src.trainers import trainer

    original = trainer.Trainer.compile

    @functools.wraps(original)
    def compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        if len(args) >= 3 and "metrics" not in kwargs and _is_metrics_list(args[2]):
            kwargs["metrics"] = args[2]
            args = args[:2] + args[3:]
        return original(self, *args, **kwargs)

    trainer.Trainer.compile = compile
