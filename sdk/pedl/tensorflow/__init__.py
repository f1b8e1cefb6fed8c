"""PEDL's TensorFlow interfaces (seed 003).

- `TensorFlowTrial`: graph mode through `tf.compat.v1`; `make_data_loaders` returns
  (training, validation) batched `tf.data.Dataset`s, `build_graph(record, is_training)` the
  tensors by name ("loss" among them).
- `EstimatorTrial`: `tf.estimator` (TensorFlow <= 2.15 only; see `pedl.tensorflow._estimator`);
  `load_estimator_from_checkpoint_path(path)` loads a downloaded checkpoint's exported SavedModel.
"""

from pedl.tensorflow._controller import TensorFlowTrialController
from pedl.tensorflow._estimator import EstimatorTrial, EstimatorTrialController
from pedl.tensorflow._estimator_load import load_estimator_from_checkpoint_path
from pedl.tensorflow._trial import TensorFlowTrial

__all__ = [
    "EstimatorTrial",
    "EstimatorTrialController",
    "TensorFlowTrial",
    "TensorFlowTrialController",
    "load_estimator_from_checkpoint_path",
]
