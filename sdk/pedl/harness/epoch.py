"""A trial's epoch in batches, measured by the harness for configs with lengths in epochs.

Determined since 0.2x takes an epoch of a PyTorch trial to be its chief's training data loader's
length; pedl does the same where `records_per_epoch` does not decide it. The harness reports the
length once per run, before its first workload (`HarnessService.ReportEpochLength`), and the
scheduler's sequencer converts the lengths from then on. Other trial types have no such length:
Determined requires `records_per_epoch` for them, and so does pedl.
"""

from __future__ import annotations

from typing import Any

from pedl.v1 import agent_pb2

# The location a refusal reports, so that two runs refused alike end the trial (no restarts).
REFUSAL_LOCATION = "experiment config: records_per_epoch"


class EpochLengthUnavailable(ValueError):
    """The config counts in epochs that this trial type cannot measure."""


def epoch_length(controller: Any) -> int:
    """The controller's epoch in batches (its training data loader's length on this rank)."""
    measure = getattr(controller, "epoch_batches", None)
    batches = measure() if measure is not None else None
    if not batches:
        kind = type(controller).__name__.removesuffix("Controller")
        why = "its training data loader has no length" if measure is not None else "it has no data loader"
        raise EpochLengthUnavailable(
            f"records_per_epoch: the config gives lengths in epochs, which a {kind} cannot measure ({why}); "
            "give top-level records_per_epoch and a global_batch_size hyperparameter, or write {batches: N}"
        )
    return batches


def refusal_signature(exc: BaseException) -> agent_pb2.FailureSignature | None:
    """The failure signature of an epoch-length refusal (None for any other error)."""
    if not isinstance(exc, EpochLengthUnavailable):
        return None
    return agent_pb2.FailureSignature(
        exception_type=f"{EpochLengthUnavailable.__module__}.{EpochLengthUnavailable.__qualname__}",
        location=REFUSAL_LOCATION,
    )
