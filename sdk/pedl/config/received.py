"""The experiment's typed config as a client of the scheduler reads it: the CLI, the SDK and the web UI.

The scheduler parses a config once and sends it in `Experiment.config_document` (`pedl.config.carried`'s
versioned document, secrets masked); this decodes it with the one decoder agents and harnesses use, so
`describe`, the SDK's objects and the web UI's pages show the trial lengths, searcher fields and
hyperparameter types the scheduler works with, and no client reads the stored YAML again. Decoded
documents are kept by their text: a page of 100 experiments, polled, decodes each config once.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from pedl._metrics import from_struct
from pedl.config import carried
from pedl.config.errors import ConfigError
from pedl.config.experiment import ExperimentConfig
from pedl.v1 import scheduler_pb2

SOURCE = "Experiment.config_document"


def experiment_config(experiment: scheduler_pb2.Experiment) -> ExperimentConfig | None:
    """The experiment's config; None when the scheduler sent none (a ListExperiments page asked
    without with_config_document) or one this pedl cannot read."""
    return _decoded(experiment.config_document)


@functools.lru_cache(maxsize=2048)
def _decoded(document: str) -> ExperimentConfig | None:
    if not document:
        return None
    try:
        return carried.from_json(document, source=SOURCE)
    except ConfigError:
        return None


def hparam_space(config: ExperimentConfig | None) -> dict[str, Any] | None:
    """The hyperparameter space that types each trial's sampled values (None: as the scheduler sent them)."""
    return config.hyperparameters if config is not None else None


def trial_length(config: ExperimentConfig | None, trial: scheduler_pb2.Trial) -> int | None:
    """The trial's length in batches as the scheduler counts it; None where unknown or open-ended."""
    if config is None:
        return None
    return config.trial_length_batches(from_struct(trial.hparams), trial.epoch_batches)


def masked_raw(config: ExperimentConfig | None) -> dict[str, Any]:
    """The validated config with its defaults (secrets masked by the scheduler), as a copy the caller
    may change: what `describe --json`, the SDK's `Experiment.config` and the web UI's JSON show."""
    return copy.deepcopy(config.raw) if config is not None else {}
