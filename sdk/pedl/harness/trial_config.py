"""The harness's experiment config: StartTrial.config_json, loaded through pedl.config's own parser.

The scheduler sends the config it parsed and stored; loading it here again means a trial never runs
on a config no parser accepted: one that does not parse (a corrupted row, a mismatched release)
stops the trial before any user code runs, with one line naming the field, and for good
(restarting would meet the same config).
"""

from __future__ import annotations

from pedl.config import ConfigError, ExperimentConfig, carried
from pedl.v1 import agent_pb2


class InvalidTrialConfig(Exception):
    """The config the trial was started with does not parse."""


def load_trial_config(config_json: str) -> ExperimentConfig:
    try:
        return carried.from_json(config_json, source=f"StartTrial.{carried.FIELD}")
    except ConfigError as exc:
        message = f"the experiment config this trial was started with is invalid: {exc}"
        raise InvalidTrialConfig(message) from None


def invalid_config_signature(exc: BaseException) -> agent_pb2.FailureSignature | None:
    """A permanent failure for an invalid config (None for any other error): no restart can help."""
    if not isinstance(exc, InvalidTrialConfig):
        return None
    return agent_pb2.FailureSignature(
        exception_type=f"{InvalidTrialConfig.__module__}.{InvalidTrialConfig.__qualname__}", permanent=True
    )
