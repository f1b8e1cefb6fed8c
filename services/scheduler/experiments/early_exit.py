"""A trial that ended itself early (Determined's EarlyExitReason): names and the lines users read.

The harness says so in a workload result (`WorkloadResult.early_exit`); the sequencer then asks for a
checkpoint and the exit, and the trial ends COMPLETED with the reason in its `end_cause` (what
`pedl trial describe` shows), while the searcher hears it exited early, as Determined's master does.
"""

from __future__ import annotations

from pedl.records import early_exit_reason
from pedl.v1 import common_pb2

_REASON = common_pb2.EarlyExitReason
_PREFIX = "EARLY_EXIT_REASON_"
# Stored in the trial's `end_cause` (which otherwise says why an ERROR happened: "user", "infrastructure").
NAMES = frozenset(name.removeprefix(_PREFIX) for name in _REASON.keys() if name != f"{_PREFIX}UNSPECIFIED")

_WHY = {
    "INVALID_HP": "its code reported invalid hyperparameters (INVALID_HP)",
    "USER_REQUESTED_STOP": "its code asked to stop (USER_REQUESTED_STOP)",
}


def reason_name(reason: int) -> str:
    """INVALID_HP, USER_REQUESTED_STOP (an unknown value from a newer harness: its number)."""
    return early_exit_reason(reason) or ""


def reason_value(name: str) -> common_pb2.EarlyExitReason.ValueType:
    """The proto value of a stored name; UNSPECIFIED for anything else (an ERROR's cause, "")."""
    return _REASON.Value(f"{_PREFIX}{name}") if name in NAMES else _REASON.EARLY_EXIT_REASON_UNSPECIFIED


def asked_line(trial_id: int, reason: int) -> str:
    why = _WHY.get(reason_name(reason), f"its code ended it ({reason_name(reason)})")
    return f"trial {trial_id} ends early: {why}; it is checkpointed and stops"


def ended_line(trial_id: int, name: str, batches: int) -> str:
    why = _WHY.get(name, f"its code ended it ({name})")
    return (
        f"trial {trial_id} completed early at batch {batches}: {why}; the searcher was told it exited "
        "early and the experiment goes on with its other trials"
    )
