"""The digits data set, split once into fixed training and validation parts."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset

# The split must not depend on the trial's seed, so every trial validates on the same data.
SPLIT_SEED = 0
VALIDATION_FRACTION = 0.2


def digits_datasets() -> tuple[TensorDataset, TensorDataset]:
    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    n_val = int(len(labels) * VALIDATION_FRACTION)
    features = torch.tensor(images / 16.0, dtype=torch.float32)
    targets = torch.tensor(labels, dtype=torch.int64)
    val, train = order[:n_val], order[n_val:]
    return TensorDataset(features[train], targets[train]), TensorDataset(features[val], targets[val])
