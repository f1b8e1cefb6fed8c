"""`pedl.frameworks.pytorch.util`: metric helpers PEDL 0.10/0.11 examples use."""

from __future__ import annotations

import torch


def error_rate(predictions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Fraction of rows whose arg-max prediction is not the label (a float scalar tensor)."""
    if predictions.ndim != 2:
        raise ValueError(
            f"error_rate: predictions must be (batch, classes), got shape {tuple(predictions.shape)}"
        )
    if labels.shape[0] != predictions.shape[0]:
        raise ValueError(f"error_rate: {predictions.shape[0]} predictions but {labels.shape[0]} labels")
    wrong = predictions.argmax(dim=1) != labels.reshape(-1).to(predictions.device)
    return wrong.to(torch.float32).mean()


def accuracy_rate(predictions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return 1.0 - error_rate(predictions, labels)
