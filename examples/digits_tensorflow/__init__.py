"""PEDL example: a graph-mode TensorFlowTrial MLP on scikit-learn's 8x8 digits (no download)."""

from .model_def import DigitsTFTrial, make_data_loaders

__all__ = ["DigitsTFTrial", "make_data_loaders"]
