"""PEDL example: an EstimatorTrial (premade DNNClassifier) on scikit-learn's 8x8 digits."""

from .model_def import DigitsEstimatorTrial

__all__ = ["DigitsEstimatorTrial"]
