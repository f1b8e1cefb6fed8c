"""The client's states and sort orders, named as Determined's `client` module names them.

Each state is a `str` enum whose value is pedl's name for it, so `exp.wait() == "COMPLETED"` and
`exp.wait() == ExperimentState.COMPLETED` both hold.
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar


class _Named(str, Enum):
    """A state that prints as pedl's name for it."""

    def __str__(self) -> str:
        return str(self.value)


class ExperimentState(_Named):
    UNSPECIFIED = "UNSPECIFIED"
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    STOPPING_COMPLETED = "STOPPING_COMPLETED"
    STOPPING_CANCELED = "STOPPING_CANCELED"
    STOPPING_ERROR = "STOPPING_ERROR"
    COMPLETED = "COMPLETED"
    CANCELED = "CANCELED"
    ERROR = "ERROR"


class TrialState(_Named):
    UNSPECIFIED = "UNSPECIFIED"
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    STOPPING_COMPLETED = "STOPPING_COMPLETED"
    STOPPING_CANCELED = "STOPPING_CANCELED"
    STOPPING_ERROR = "STOPPING_ERROR"
    COMPLETED = "COMPLETED"
    CANCELED = "CANCELED"
    ERROR = "ERROR"


class CheckpointState(_Named):
    UNSPECIFIED = "UNSPECIFIED"
    ACTIVE = "ACTIVE"
    COMPLETED = "COMPLETED"
    ERROR = "ERROR"
    DELETING = "DELETING"
    DELETED = "DELETED"
    MISSING = "MISSING"
    PARTIALLY_DELETED = "PARTIALLY_DELETED"


class OrderBy(Enum):
    ASC = "ASC"
    DESC = "DESC"
    # Determined's older spellings.
    ASCENDING = "ASC"
    DESCENDING = "DESC"


class TrialSortBy(Enum):
    ID = "id"
    STATE = "state"
    START_TIME = "start_time"
    END_TIME = "end_time"
    BATCHES_PROCESSED = "total_batches"
    SEARCHER_METRIC_VALUE = "best_validation_metric"


class CheckpointSortBy(Enum):
    UUID = "uuid"
    TRIAL_ID = "trial_id"
    BATCH_NUMBER = "total_batches"
    END_TIME = "report_time"
    STATE = "state"
    SEARCHER_METRIC = "searcher_metric"


_E = TypeVar("_E", ExperimentState, TrialState, CheckpointState)


def state_of(enum: type[_E], name: str) -> _E:
    """pedl's state name as the enum member; one this client does not know (a newer scheduler's) is
    UNSPECIFIED."""
    return enum.__members__.get(name, enum.UNSPECIFIED)
