"""PEDL 0.11's `pedl.frameworks.keras.data.InMemorySequence`, as its published iris example uses it:
a DataFrame of features and one-hot labels, batched in order, the last batch holding the rest."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pedl.frameworks.keras.data import InMemorySequence


def test_batches_a_dataframe_and_labels_in_order() -> None:
    features = pd.DataFrame({"a": np.arange(5.0), "b": np.arange(5.0) * 10})
    labels = np.eye(3)[[0, 1, 2, 0, 1]]
    sequence = InMemorySequence(data=features, labels=labels, batch_size=2)
    assert len(sequence) == 3
    x, y = sequence[2]
    assert x.tolist() == [[4.0, 40.0]] and y.tolist() == [[0.0, 1.0, 0.0]]
    x, y, w = InMemorySequence({"in": np.arange(4)}, np.arange(4), 3, sample_weight=np.ones(4))[0]
    assert x["in"].tolist() == [0, 1, 2] and w.tolist() == [1.0, 1.0, 1.0]


def test_mismatched_rows_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="3 rows of data but 2 labels"):
        InMemorySequence(np.zeros((3, 2)), np.zeros(2), batch_size=1)


def test_a_pedl011_trial_whose_keras_callbacks_takes_hparams_gets_them() -> None:
    """PEDL 0.11's published iris trial defines `keras_callbacks(self, hparams)`."""
    import keras

    from pedl.frameworks.keras import TFKerasTensorBoard as TensorBoard
    from pedl.frameworks.keras import TFKerasTrial

    seen = []

    class Trial(TFKerasTrial):
        def build_model(self, hparams):
            model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            return model

        def keras_callbacks(self, hparams):
            seen.append(hparams)
            return [TensorBoard(update_freq="batch", write_graph=False)]

    data = InMemorySequence(np.zeros((4, 2)), np.zeros(4), batch_size=2)
    Trial.create_controller({"batch_size": 2}, (data, data), "model_def:Trial")
    assert seen == [{"batch_size": 2}]
