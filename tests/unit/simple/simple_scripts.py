"""Tiny Keras scripts (Simple Model Definitions) written into a test's directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PRELUDE = """
import json, os, sys
import keras
import numpy as np
import tensorflow as tf
import pedl

rng = np.random.default_rng(0)
x = rng.normal(size=(60, 4)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("int64")
model = keras.Sequential([
    keras.Input((4,)),
    keras.layers.Dense(8, activation="relu"),
    keras.layers.Dropout(0.2),
    keras.layers.Dense(2),
])
model.compile(
    optimizer=keras.optimizers.Adam(pedl.get_hyperparameter("lr")),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
)
"""

# model.fit calls over each data form Keras accepts (8 training batches per epoch or so).
FITS = {
    "arrays": "model.fit(x, y, batch_size=8, epochs=100, validation_split=0.25)",
    "validation_data": "model.fit(x[:44], y[:44], batch_size=6, validation_data=(x[44:], y[44:]))",
    "dataset": """
train = tf.data.Dataset.from_tensor_slices((x[:44], y[:44])).shuffle(44).batch(6)
val = tf.data.Dataset.from_tensor_slices((x[44:], y[44:])).batch(8)
model.fit(train, validation_data=val, epochs=3)
""",
    "pydataset": """
class Batches(keras.utils.PyDataset):
    def __init__(self, x, y, shuffle):
        super().__init__()
        self.x, self.y, self.order, self.shuffle = x, y, np.arange(len(x)), shuffle
        self.rng = np.random.default_rng(1)

    @property
    def num_batches(self):
        return -(-len(self.x) // 6)

    def __getitem__(self, i):
        rows = self.order[i * 6 : (i + 1) * 6]
        return self.x[rows], self.y[rows]

    def on_epoch_end(self):
        if self.shuffle:
            self.order = self.rng.permutation(len(self.x))

model.fit(Batches(x[:44], y[:44], True), validation_data=Batches(x[44:], y[44:], False))
""",
}


def write_script(directory: Path, body: str, name: str = "train.py") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(PRELUDE + body + "\n")
    return directory


def script_config(script: str = "train.py", args: list[str] | None = None) -> dict[str, Any]:
    return {
        "entrypoint": {"script": script, "args": args or []},
        "hyperparameters": {"lr": {"type": "const", "val": 0.05}},
        "searcher": {"name": "single", "metric": "accuracy", "smaller_is_better": False, "max_steps": 4},
        "batches_per_step": 5,
    }
