"""PEDL's Keras interface (Keras 3 on the TensorFlow backend).

Model definition (its `__init__.py` exposes both)::

    class MyTrial(pedl.keras.KerasTrial):
        def build_model(self, hparams):           # required
            model = keras.Sequential([...])
            model.compile(optimizer=keras.optimizers.Adam(hparams["lr"]),
                          loss="sparse_categorical_crossentropy", metrics=["accuracy"])
            return model                          # compiled: PEDL trains what compile() says

        def batch_size(self):                     # only when make_data_loaders returns arrays
            return 32

PEDL 0.11's form also runs: `build_model` returns an uncompiled model and the trial defines
`optimizer()`, `loss()`, `training_metrics()` / `validation_metrics()`; pedl compiles it with them
(`pedl.keras._compile`, which also says what names are reported). A compiled model wins.

    def make_data_loaders(experiment_config, hparams):
        return training_data, validation_data

Each of the two data values may be a batched `tf.data.Dataset`, a `keras.utils.PyDataset`
(or Sequence), a generator function (PEDL calls it once per epoch), or NumPy arrays `(x, y)` /
`(x, y, sample_weight)` batched by `batch_size()` (the training arrays are reshuffled every
epoch). The training data may also be a started endless generator: a resumed trial replays it
under the trial seed (`pedl.keras._replay`). Batches are `(x, y)` or `(x, y, sample_weight)`.

What PEDL does with them:
- RUN_STEP trains batch by batch with `model.train_on_batch` until the step's absolute batch
  count, cycling over epochs; the step's metrics are the per-batch results (`loss` and the
  compiled metrics, e.g. `accuracy`) averaged over its batches.
- Validation is `model.evaluate` over the whole validation data; metrics are reported under
  their compiled names (`loss`, `accuracy`, ...), which is what `searcher.metric` names.
- Checkpoints hold the weights (`model.weights.h5`, loadable with `model.load_weights`), every
  model and optimizer variable, the batch count and the training data position; a restored
  trial continues exactly where the checkpoint was taken. `load_model_from_checkpoint_path(path)`
  rebuilds the trained model from a downloaded checkpoint.
- The trial seed seeds Python, NumPy, TensorFlow and Keras before `make_data_loaders` and
  `build_model`; a `tf.data` shuffle without an explicit seed is reproducible too.
- With `resources.slots_per_trial > 1` each slot runs a worker of a
  `tf.distribute.MultiWorkerMirroredStrategy`, started before `make_data_loaders`;
  `build_model` runs under its scope, every worker trains on a disjoint shard of the batches
  and metrics are reduced over all workers (see `pedl.keras._distributed`).
"""

from pedl.keras._controller import KerasTrialController
from pedl.keras._load import load_model_from_checkpoint_path
from pedl.keras._trial import KerasTrial

__all__ = ["KerasTrial", "KerasTrialController", "load_model_from_checkpoint_path"]
