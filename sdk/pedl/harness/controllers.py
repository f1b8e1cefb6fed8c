"""The one registry from a trial class to its framework's controller.

Trial classes do not import their controllers (that made every framework package an import
circle): the harness, local mode and test mode find the controller here, by the framework
interface the user's class derives from. Interfaces are named by "module:qualname" so that
looking one up imports no framework; only the factory that is picked imports its controller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pedl.harness.controller import TrialController

Loaders = Sequence[Any] | Any
# (trial class, hparams, make_data_loaders' result, where that came from) -> controller
Factory = Callable[[type, dict[str, Any], Loaders, str], "TrialController"]


def _pytorch(trial_class: type, hparams: dict[str, Any], loaders: Loaders, origin: str) -> TrialController:
    from pedl.pytorch._controller import PyTorchTrialController

    return PyTorchTrialController.from_trial_class(trial_class, hparams, loaders, origin)


def _keras(trial_class: type, hparams: dict[str, Any], loaders: Loaders, origin: str) -> TrialController:
    from pedl.keras._controller import KerasTrialController

    return KerasTrialController.from_trial_class(trial_class, hparams, loaders, origin)


def _tensorflow(trial_class: type, hparams: dict[str, Any], loaders: Loaders, origin: str) -> TrialController:
    from pedl.tensorflow._controller import TensorFlowTrialController

    return TensorFlowTrialController.from_trial_class(trial_class, hparams, loaders, origin)


def _estimator(trial_class: type, hparams: dict[str, Any], loaders: Loaders, origin: str) -> TrialController:
    from pedl.tensorflow._estimator import EstimatorTrialController

    return EstimatorTrialController(trial_class(hparams))


def _script(trial_class: type, hparams: dict[str, Any], loaders: Loaders, origin: str) -> TrialController:
    from pedl.simple._controller import ScriptTrialController

    return ScriptTrialController.from_script(trial_class(hparams))


def _adapter(
    trial_class: type[Any], hparams: dict[str, Any], loaders: Loaders, origin: str
) -> TrialController:
    # Interfaces of later PEDL releases and of Determined are adapters onto the seed controllers:
    # each builds its own (the seed controller with a few hooks overridden), in its own package.
    return trial_class.create_controller(hparams, loaders, origin)


FACTORIES: dict[str, Factory] = {
    "pedl.frameworks.pytorch._trial:PyTorchTrial": _adapter,
    "pedl.frameworks.keras:TFKerasTrial": _adapter,
    "determined.pytorch._trial:PyTorchTrial": _adapter,
    "determined.keras:TFKerasTrial": _adapter,
    "determined.estimator:EstimatorTrial": _adapter,
    "determined.pytorch.deepspeed._trial:DeepSpeedTrial": _adapter,
    "pedl.pytorch._trial:PyTorchTrial": _pytorch,
    "pedl.keras._trial:KerasTrial": _keras,
    "pedl.tensorflow._trial:TensorFlowTrial": _tensorflow,
    "pedl.tensorflow._estimator:EstimatorTrial": _estimator,
    "pedl.simple._trial:ScriptTrial": _script,
}


def factory_for(trial_class: type) -> Factory:
    """The factory of the nearest framework interface in `trial_class`'s bases."""
    for klass in trial_class.__mro__:
        factory = FACTORIES.get(f"{klass.__module__}:{klass.__qualname__}")
        if factory is not None:
            return factory
    raise TypeError(
        f"{trial_class.__qualname__} derives from no framework interface; derive from one such as "
        "pedl.pytorch.PyTorchTrial, pedl.keras.KerasTrial or pedl.tensorflow.TensorFlowTrial"
    )


def create_controller(
    trial_class: type, hparams: dict[str, Any], loaders: Loaders, origin: str
) -> TrialController:
    """Builds the framework's controller for `trial_class`; `origin` names where the data loaders
    came from, for error messages."""
    return factory_for(trial_class)(trial_class, hparams, loaders, origin)
