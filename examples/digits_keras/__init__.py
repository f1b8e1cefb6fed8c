"""PEDL example: a KerasTrial MLP on scikit-learn's 8x8 digits (no download)."""

from .model_def import DigitsKerasTrial, make_data_loaders

__all__ = ["DigitsKerasTrial", "make_data_loaders"]
