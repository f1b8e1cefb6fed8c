"""Helpers PEDL 0.10/0.11 model definitions import as `pedl.util`."""

from pedl._trial_context import get_experiment_config

__all__ = ["get_experiment_config"]
