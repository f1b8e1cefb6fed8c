"""Determined's metric writers: `pytorch.TorchWriter`, `tensorflow.TFWriter`."""

from determined.tensorboard import MetricWriter

__all__ = ["MetricWriter"]
