"""Determined's Estimator API (`det.estimator.EstimatorTrial` with an EstimatorTrialContext) on
pedl's Estimator controller (TensorFlow <= 2.15: `scripts/build-tf215-env`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from determined._trial_context import TrialContext
from pedl.frameworks._arity import accept_hparams
from pedl.frameworks.tensorflow import ESTIMATOR_METHODS
from pedl.tensorflow._estimator import EstimatorTrial as _SeedEstimatorTrial
from pedl.tensorflow._estimator import EstimatorTrialController
from pedl.tensorflow._estimator_load import load_estimator_from_checkpoint_path

# build_serving_input_receiver_fns() returns {name: ServingInputReceiverFn} (annotations in
# Determined's examples): a function taking no arguments that returns a ServingInputReceiver.
ServingInputReceiverFn = Callable[[], Any]


class EstimatorTrialContext(TrialContext):
    """Handed to `EstimatorTrial.__init__`. Estimator trials train in one process (one slot), so
    the wrap_* calls return what they are given."""

    def wrap_dataset(self, dataset: Any, shard_dataset: bool = True) -> Any:
        return dataset

    def wrap_optimizer(self, optimizer: Any) -> Any:
        return optimizer

    def wrap_run_config(self, config: Any) -> Any:
        return config


class EstimatorTrial(_SeedEstimatorTrial):
    """Subclass it; pedl constructs it as `TrialClass(context)`; `build_estimator(self)`,
    `build_train_spec(self)`, `build_validation_spec(self)` take no hparams here."""

    framework_interface = "determined.estimator.EstimatorTrial"
    trial_context_class = EstimatorTrialContext

    def __init__(self, context: EstimatorTrialContext) -> None:
        self.context = context
        self.hparams = context.get_hparams()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        accept_hparams(cls, ESTIMATOR_METHODS)

    @classmethod
    def create_controller(
        cls, hparams: dict[str, Any], data_loaders: Sequence[Any] | Any, origin: str
    ) -> EstimatorTrialController:
        context = cls.trial_context_class.for_running_trial(hparams)
        trial = cls(context)
        if not hasattr(trial, "context"):
            trial.context = context
        trial.hparams = context.get_hparams()
        controller = EstimatorTrialController(trial)
        _seed_graph(controller.estimator, context.get_trial_seed())
        return controller


def _seed_graph(estimator: Any, seed: int) -> None:
    """Gives the Estimator's graphs the trial seed, as Determined's harness does, unless the trial's
    RunConfig sets `tf_random_seed` itself (each Estimator call builds a fresh graph, which the
    process-wide seed does not reach). TensorFlow 2.15 is the last release with tf.estimator, so its
    private `_config` attribute is fixed."""
    config = estimator.config
    if config.tf_random_seed is None:
        estimator._config = config.replace(tf_random_seed=seed % 2**31)


__all__ = [
    "EstimatorTrial",
    "EstimatorTrialContext",
    "ServingInputReceiverFn",
    "load_estimator_from_checkpoint_path",
]
