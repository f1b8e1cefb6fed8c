"""A plain Keras script (an MLP on scikit-learn's 8x8 digits) run by PEDL as a Simple Model Definition.

Nothing PEDL-specific but `pedl.get_hyperparameter`: PEDL takes over the `model.fit(...)` call,
trains in steps, validates and checkpoints as the searcher asks, and resumes from checkpoints.
"""

from __future__ import annotations

import argparse

import keras
import numpy as np
from sklearn.datasets import load_digits

import pedl


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--validation-fraction", type=float, default=0.2)
    parser.add_argument("--epochs", type=int, default=10, help="ignored under PEDL: the searcher decides")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    images, labels = load_digits(return_X_y=True)
    features, targets = (images / 16.0).astype("float32"), labels.astype("int64")
    # A fixed split, so that every trial validates on the same data.
    order = np.random.default_rng(0).permutation(len(targets))
    n_val = int(len(targets) * args.validation_fraction)
    val, train = order[:n_val], order[n_val:]

    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(int(pedl.get_hyperparameter("hidden_size")), activation="relu"),
            keras.layers.Dropout(float(pedl.get_hyperparameter("dropout"))),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(float(pedl.get_hyperparameter("learning_rate"))),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    model.fit(
        features[train],
        targets[train],
        batch_size=int(pedl.get_hyperparameter("batch_size")),
        epochs=args.epochs,
        validation_data=(features[val], targets[val]),
    )
    print("not reached under PEDL: fit() does not return to the script")


if __name__ == "__main__":
    main()
