"""A tiny KerasTrial (with dropout, so seed states matter) over several kinds of data sources."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from pedl.keras import KerasTrial


def toy_arrays() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4)).astype("float32")
    return x, (x[:, 0] + x[:, 1] > 0).astype("int64")


class ToyPyDataset(keras.utils.PyDataset):
    """Reshuffles in on_epoch_end from its own seeded generator (if `shuffle`)."""

    def __init__(self, batch: int = 8, shuffle: bool = True) -> None:
        super().__init__()
        self.shuffle = shuffle
        self.x, self.y = toy_arrays()
        self.batch = batch
        self.rng = np.random.default_rng(7)
        self.order = np.arange(len(self.x))

    @property
    def num_batches(self) -> int:
        return -(-len(self.x) // self.batch)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rows = self.order[index * self.batch : (index + 1) * self.batch]
        return self.x[rows], self.y[rows]

    def on_epoch_end(self) -> None:
        if self.shuffle:
            self.order = self.rng.permutation(len(self.x))


def toy_generator_function() -> Any:
    x, y = toy_arrays()
    for i in range(0, len(x), 8):
        yield x[i : i + 8], y[i : i + 8]


def toy_data(kind: str) -> tuple[Any, Any]:
    x, y = toy_arrays()
    if kind == "dataset":
        train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(60).batch(8)
        return train, tf.data.Dataset.from_tensor_slices((x[:20], y[:20])).batch(8)
    if kind == "arrays":
        return (x, y), (x[:20], y[:20])
    if kind == "pydataset":
        return ToyPyDataset(), ToyPyDataset(shuffle=False)
    if kind == "generator":
        return toy_generator_function, toy_generator_function
    if kind == "started":  # a started endless generator: resumed by replay under the trial seed
        return toy_started_generator(), (x[:20], y[:20])
    raise ValueError(kind)


def toy_started_generator() -> Any:
    x, y = toy_arrays()
    while True:
        order = np.random.permutation(len(x))
        for i in range(0, len(x), 8):
            rows = order[i : i + 8]
            yield x[rows], y[rows]


class ToyKerasTrial(KerasTrial):
    def build_model(self, hparams: dict[str, Any]) -> keras.Model:
        model = keras.Sequential(
            [
                keras.Input((4,)),
                keras.layers.Dense(8, activation="relu"),
                keras.layers.Dropout(0.2),
                keras.layers.Dense(2),
            ]
        )
        model.compile(
            optimizer=keras.optimizers.Adam(hparams.get("lr", 0.05)),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        return model

    def batch_size(self) -> int:
        return 8
