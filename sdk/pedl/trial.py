"""The framework-neutral base of every Trial API (PyTorchTrial, and later TensorFlow and Keras).

It stays free of framework imports so the harness and `pedl.model_def` can recognise trials
without importing torch.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pedl.harness.controller import TrialController


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

    @classmethod
    def create_controller(
        cls, hparams: dict[str, Any], data_loaders: Sequence[Any] | Any, origin: str
    ) -> TrialController:
        """Builds the framework's controller for this trial class; `origin` names where the
        data loaders came from, for error messages."""
        raise TypeError(
            f"{cls.__qualname__} derives from pedl.trial.Trial directly; derive from a framework "
            "interface such as pedl.pytorch.PyTorchTrial instead"
        )


def is_framework_base(cls: type) -> bool:
    """True for the interfaces pedl itself defines (Trial, PyTorchTrial, ...), which user
    model definitions re-export but never mean as their trial (pedl's `determined` package too)."""
    module = getattr(cls, "__module__", "") or ""
    return module.split(".", 1)[0] in ("pedl", "determined")
