"""PEDL example: an MLP on scikit-learn's 8x8 handwritten digits (no download needed)."""

from .model_def import DigitsTrial, make_data_loaders

__all__ = ["DigitsTrial", "make_data_loaders"]
