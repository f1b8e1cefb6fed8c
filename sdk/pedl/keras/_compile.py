"""PEDL 0.11's KerasTrial form: `build_model(hparams)` returns an uncompiled model and the trial
names its training in methods, `optimizer()`, `loss()`, `training_metrics()` and
`validation_metrics()` (dicts of name -> `fn(y_true, y_pred)`). pedl compiles the model with them,
so that the one Keras controller trains it as any compiled model.

A model that comes back compiled wins: its compile() is what trains, and the trial's optimizer(),
loss() and metric methods are not called.

Names reported: training metrics as `loss` and the `training_metrics()` names; validation metrics
as PEDL 0.11 reported them, under the `validation_metrics()` names (`validation_error`, what its
configs' `searcher.metric` names), and the validation loss as `val_loss`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import keras

from pedl.model_def.errors import describe

# Where a validation metric's name is taken by a different training metric's function.
_VALIDATION_ONLY = "pedl_validation_"


@dataclass(frozen=True)
class ReportedNames:
    """Reported name -> the compiled metric's name, for training and for validation."""

    training: dict[str, str]
    validation: dict[str, str]

    def training_metrics(self, compiled: Mapping[str, Any]) -> dict[str, Any]:
        return {name: compiled[source] for name, source in self.training.items() if source in compiled}

    def validation_metrics(self, compiled: Mapping[str, Any]) -> dict[str, Any]:
        return {name: compiled[source] for name, source in self.validation.items() if source in compiled}


def defines_training_methods(trial: Any) -> bool:
    """Whether the trial is written in PEDL 0.11's form (it defines `optimizer()`)."""
    return callable(getattr(trial, "optimizer", None))


def compile_from_trial(trial: Any, model: Any, where: str) -> ReportedNames | None:
    """Compiles an uncompiled `model` with the trial's optimizer(), loss() and metric methods; the
    names to report, or None when the model came compiled (or the trial has no such methods)."""
    cls = type(trial)
    if is_compiled(model) and defines_training_methods(trial):
        warnings.warn(
            f"{where} returned a compiled model: its compile() wins over {cls.__qualname__}'s "
            "optimizer(), loss() and metric methods, which pedl does not call",
            UserWarning,
            stacklevel=2,
        )
    if is_compiled(model) or not isinstance(model, keras.Model):
        return None
    missing = [name for name in ("optimizer", "loss") if not callable(getattr(trial, name, None))]
    if missing:
        methods = " and ".join(f"{name}()" for name in missing)
        raise ValueError(
            f"{where} returned an uncompiled model and {cls.__qualname__} defines no {methods}: "
            "compile the model in build_model, or define optimizer() and loss() for pedl to compile it"
        )
    training = _metric_functions(trial, "training_metrics")
    validation = _metric_functions(trial, "validation_metrics")
    compiled: dict[str, Callable[..., Any]] = dict(training)
    validation_sources = {}
    for name, fn in validation.items():
        source = name if compiled.get(name, fn) is fn else _VALIDATION_ONLY + name
        compiled[source] = fn
        validation_sources[name] = source
    model.compile(
        optimizer=trial.optimizer(),
        loss=trial.loss(),
        metrics=[keras.metrics.MeanMetricWrapper(fn, name=name) for name, fn in compiled.items()],
    )
    return ReportedNames(
        training={"loss": "loss", **{name: name for name in training}},
        validation={"val_loss": "loss", **validation_sources},
    )


def _metric_functions(trial: Any, method: str) -> dict[str, Callable[..., Any]]:
    getter = getattr(trial, method, None)
    if not callable(getter):
        return {}
    metrics = getter()
    where = describe(getattr(type(trial), method))
    if not isinstance(metrics, Mapping):
        raise TypeError(
            f"{where} must return a dict of name -> metric function, got {type(metrics).__name__}"
        )
    for name, fn in metrics.items():
        if not isinstance(name, str) or not callable(fn):
            raise TypeError(f"{where}: {name!r} must name a metric function fn(y_true, y_pred), got {fn!r}")
        if name == "loss":
            raise ValueError(f"{where}: the name 'loss' is the loss()'s; name the metric otherwise")
    return dict(metrics)


def is_compiled(model: Any) -> bool:
    # Keras 3's `compiled`; Keras 2 (TensorFlow <= 2.15) keeps it as `_is_compiled`.
    return bool(getattr(model, "compiled", getattr(model, "_is_compiled", False)))
