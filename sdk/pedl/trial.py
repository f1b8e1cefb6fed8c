"""The framework-neutral base of every Trial API (PyTorchTrial, and later TensorFlow and Keras).

It stays free of framework imports so the harness and `pedl.model_def` can recognise trials
without importing torch. A trial class never names its controller: the harness picks it from
the framework interface through `pedl.harness.controllers`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

# PEDL 0.11's type names for a Keras trial's metric functions, `fn(y_true, y_pred) -> value`:
# `loss()` and `training_metrics()` return MetricOps, `validation_metrics()` ValidOps.
MetricOp = Callable[[Any, Any], Any]
ValidOp = Callable[[Any, Any], Any]


# ABC so framework interfaces can declare abstract methods; Trial itself has none.
class Trial(abc.ABC):  # noqa: B024
    """One trial's user code; PEDL constructs it as `TrialClass(hparams)`.

    A subclass that defines no `__init__` gets `self.hparams` from here; one that does should
    call `super().__init__(hparams)`.
    """

    # Name of the framework interface, shown in errors ("does not implement PyTorchTrial ...").
    framework_interface: str = "Trial"
    # Whether the interface trains data-parallel with resources.slots_per_trial > 1.
    several_slots: bool = True

    def __init__(self, hparams: dict[str, Any]) -> None:
        self.hparams = dict(hparams)


def is_framework_base(cls: type) -> bool:
    """True for the interfaces pedl itself defines (Trial, PyTorchTrial, ...), which user
    model definitions re-export but never mean as their trial (pedl's `determined` package too)."""
    module = getattr(cls, "__module__", "") or ""
    return module.split(".", 1)[0] in ("pedl", "determined")
