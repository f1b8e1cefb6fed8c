"""Which failed runs spend a trial's `max_restarts`, and how long any restarted trial waits.

Only a failure of the trial's own code spends `max_restarts`. A run that ended because the
infrastructure failed it (the checkpoint store or its S3 unreachable for the harness's whole retry
budget, the agent lost) restarts without spending one, however often: the user's budget is for their
bugs, not for an outage. Every restart waits first, exponentially longer each time (with jitter, so
the trials of a cluster-wide outage do not come back in lockstep), up to a cap: a trial failing at
every start no longer burns through its restarts in a second, and one waiting for storage does not
hammer it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from pedl._backoff import backoff_seconds
from pedl._exit_codes import AGENT_STOPPED_EXIT_CODE
from pedl.harness.store_retry import STORE_UNAVAILABLE_EXIT_CODE

# What a harness's exit code says about the infrastructure (the text `describe` shows).
INFRASTRUCTURE_EXITS = {
    STORE_UNAVAILABLE_EXIT_CODE: "the checkpoint store is unreachable",
    AGENT_STOPPED_EXIT_CODE: "its agent was stopped (a Slurm job cancelled or at its time limit, a machine "
    "shut down)",
}


@dataclass(frozen=True)
class RestartBackoff:
    """The wait before restart number n (1, 2, ...): base * 2**(n-1), capped, times a jitter in [0.5, 1]."""

    base_s: float = 1.0
    cap_s: float = 60.0

    def __post_init__(self) -> None:
        if not (self.base_s >= 0 and self.cap_s >= 0):
            raise ValueError(f"restart backoff must be >= 0 s, got base {self.base_s}, cap {self.cap_s}")

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        return backoff_seconds(attempt, self.base_s, self.cap_s, rand=rand)


def infrastructure_cause(exit_code: int) -> str | None:
    """Why a run with this exit code failed, when the infrastructure failed it; None for the trial's own."""
    return INFRASTRUCTURE_EXITS.get(exit_code)


# A trial's recorded `end_cause` when it ended ERROR.
USER = "user"
INFRASTRUCTURE = "infrastructure"

# What older pedl versions wrote as the error of a trial the infrastructure ended (they recorded no
# cause): the harness's store client giving up, or the scheduler losing the trial's agent.
_LEGACY_INFRASTRUCTURE_ERRORS = re.compile(
    r"checkpoint store (at \S+ )?(is )?unreachable|^agent \S+ was lost|the checkpoint store is unreachable"
)


def ended_by_infrastructure(end_cause: str, error: str) -> bool:
    """Whether an ERROR trial ended because of the infrastructure, not its own code."""
    if end_cause:
        return end_cause == INFRASTRUCTURE
    return bool(_LEGACY_INFRASTRUCTURE_ERRORS.search(error))
