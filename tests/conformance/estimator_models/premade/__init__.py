"""EstimatorTrial with a premade Estimator (seed 003): a DNNClassifier given an optimizer instance,
two serving input receiver functions exported with every checkpoint, data from download_data."""

from .model import PremadeTrial, download_data

__all__ = ["PremadeTrial", "download_data"]
