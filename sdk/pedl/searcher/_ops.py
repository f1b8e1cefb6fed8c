"""The operations a searcher asks for. Lengths are absolute batch counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Create:
    """Start a new trial with these hyperparameters.

    `checkpoint_from` names an earlier trial (its request id) whose latest checkpoint the new trial
    starts from, weights and batch count both: PBT copies a parent. The new trial's lengths stay
    absolute, continuing from that checkpoint's batch count.
    """

    request_id: str
    hparams: dict[str, Any]
    seed: int
    checkpoint_from: str | None = None


@dataclass(frozen=True)
class Resume:
    """Open again a trial this search closed (an ASHA promotion): the same trial, same id, goes on
    from its latest checkpoint toward the targets that follow, as Determined's adaptive_asha does."""

    request_id: str


@dataclass(frozen=True)
class ValidateAfter:
    """Train the trial until `length` batches in all, then report its searcher metric."""

    request_id: str
    length: int


@dataclass(frozen=True)
class Close:
    """The trial has trained enough: checkpoint it and let it exit."""

    request_id: str


@dataclass(frozen=True)
class Shutdown:
    """The search is over."""

    failure: bool = False


Operation = Create | Resume | ValidateAfter | Close | Shutdown
