"""Experiment configs: parse Determined- and PEDL-format YAML into one validated, typed object."""

from pedl.config.entrypoint import Entrypoint, parse_entrypoint
from pedl.config.errors import ConfigError
from pedl.config.experiment import ExperimentConfig, parse_experiment_config
from pedl.config.masking import MASK, mask_secrets

__all__ = [
    "ConfigError",
    "Entrypoint",
    "ExperimentConfig",
    "MASK",
    "mask_secrets",
    "parse_entrypoint",
    "parse_experiment_config",
]
