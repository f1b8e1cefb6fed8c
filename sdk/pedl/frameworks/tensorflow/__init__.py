"""PEDL 0.10/0.11's TensorFlow interfaces (`from pedl.frameworks.tensorflow import TensorFlowTrial,
EstimatorTrial`), on the seed TensorFlow and Estimator controllers. Their methods take the same
arguments as the seed's; `build_estimator(self)`-style methods without hparams work too."""

from __future__ import annotations

from typing import Any

from pedl.frameworks._arity import accept_hparams
from pedl.tensorflow._estimator import EstimatorTrial as _SeedEstimatorTrial
from pedl.tensorflow._trial import TensorFlowTrial as _SeedTensorFlowTrial

ESTIMATOR_METHODS = (
    "build_estimator",
    "build_train_spec",
    "build_validation_spec",
    "build_serving_input_receiver_fns",
)


def wrap_dataset(dataset: Any) -> Any:
    """Returns `dataset`: Estimator trials run in one process, so there is nothing to shard."""
    return dataset


def wrap_optimizer(optimizer: Any) -> Any:
    """Returns `optimizer`: Estimator trials run in one process, so gradients need no averaging."""
    return optimizer


class TensorFlowTrial(_SeedTensorFlowTrial):
    """PEDL 0.11's TensorFlowTrial: the seed interface under its 0.11 import path."""


class EstimatorTrial(_SeedEstimatorTrial):
    """PEDL 0.11's EstimatorTrial; `self.wrap_dataset`/`self.wrap_optimizer` as in its examples."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        accept_hparams(cls, ESTIMATOR_METHODS)

    def wrap_dataset(self, dataset: Any) -> Any:
        return wrap_dataset(dataset)

    def wrap_optimizer(self, optimizer: Any) -> Any:
        return wrap_optimizer(optimizer)


__all__ = ["EstimatorTrial", "TensorFlowTrial", "wrap_dataset", "wrap_optimizer"]
