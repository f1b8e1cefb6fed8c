"""TensorFlowTrial found through a nested entrypoint (`lib.trial:trial_classes.NestedTrial`, seed
001/004); records are dictionaries, training_metrics and session_config are left to their defaults.
make_data_loaders is exposed at the top level, where seed 000 says PEDL looks for it."""

from .lib.trial import make_data_loaders

__all__ = ["make_data_loaders"]
