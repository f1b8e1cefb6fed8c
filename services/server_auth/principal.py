"""Who is calling, as the interceptor established it, and the refusal every auth check raises."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

import grpc


@dataclass(frozen=True)
class Principal:
    """Who is calling: a user, a service holding the cluster secret, or a trial's harness."""

    username: str
    admin: bool
    kind: str = "user"  # "user" | "cluster" | "trial" | "anonymous" (authentication off)
    experiment_id: int = 0
    # A trial's token: the trial and the run it was minted for (ReportTrialMetrics checks both).
    trial_id: int = 0
    run_id: int = 0


ANONYMOUS = Principal("", admin=True, kind="anonymous")
CLUSTER = Principal("", admin=True, kind="cluster")

_current: contextvars.ContextVar[Principal] = contextvars.ContextVar("pedl_principal", default=ANONYMOUS)


def current_principal() -> Principal:
    return _current.get()


def set_current_principal(principal: Principal) -> None:
    """The interceptor's: for the rest of this call, `current_principal()` is `principal`."""
    _current.set(principal)


class Denied(Exception):
    """A call refused with `code` (UNAUTHENTICATED, PERMISSION_DENIED, ...) and the one line to show."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
