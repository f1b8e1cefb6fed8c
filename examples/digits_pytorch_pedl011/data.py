"""Data functions named by the config's `entrypoints:` mapping (PEDL 0.11).

The digits images ship with scikit-learn, so `download_data` only says where a real download
would have gone; nothing is fetched.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset

import pedl
from pedl.frameworks.pytorch.data import DataLoader

SPLIT_SEED = 0  # fixed, so every trial validates on the same images


def download_data(experiment_config: dict[str, Any], hparams: dict[str, Any]) -> str:
    directory = os.path.abspath("data")
    os.makedirs(directory, exist_ok=True)
    return directory


def make_data_loaders(
    experiment_config: dict[str, Any], hparams: dict[str, Any]
) -> tuple[DataLoader, DataLoader]:
    assert os.path.isdir(pedl.get_download_data_dir())
    images, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    features = torch.tensor(images / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    targets = torch.tensor(labels, dtype=torch.int64)
    n_val = len(labels) // 5
    val, train = order[:n_val], order[n_val:]
    batch_size = pedl.get_hyperparameter("batch_size")
    return (
        DataLoader(TensorDataset(features[train], targets[train]), batch_size=batch_size, shuffle=True),
        DataLoader(TensorDataset(features[val], targets[val]), batch_size=batch_size),
    )
