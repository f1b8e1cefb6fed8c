"""`core_context.preempt`: whether the platform wants the script to stop now (checkpoint, then exit).

On a cluster the answer is yes when the trial is paused or killed, when the scheduler preempts it
for another, and when the searcher is done with it (ASHA stopping it at a rung). A script that
stops on it resumes from its latest checkpoint when it runs again.
"""

from __future__ import annotations

import enum

from determined.core._distributed import DistributedContext
from determined.core._link import Link


class PreemptMode(enum.Enum):
    # Every rank calls should_preempt() together; the chief asks and tells the others.
    WorkersAskChief = "WORKERS_ASK_CHIEF"
    # Only the chief calls should_preempt(); it tells the others itself.
    ChiefOnly = "CHIEF_ONLY"


class PreemptContext:
    def __init__(self, link: Link, dist: DistributedContext, mode: PreemptMode) -> None:
        if not isinstance(mode, PreemptMode):
            raise TypeError(f"preempt_mode must be a PreemptMode, got {mode!r}")
        self._link = link
        self._dist = dist
        self._mode = mode
        self._acknowledged = False
        self._closed = False

    def close(self) -> None:
        self._closed = True

    def should_preempt(self, auto_ack: bool = True) -> bool:
        if self._closed:
            raise RuntimeError("should_preempt called after the core context was closed")
        if self._mode is PreemptMode.ChiefOnly and self._dist.rank != 0:
            raise RuntimeError(
                "should_preempt: with PreemptMode.ChiefOnly only the chief (rank 0) may call it; "
                f"this is rank {self._dist.rank}"
            )
        answer = bool(self._link.call("should_preempt")) if self._dist.rank == 0 else False
        if self._mode is PreemptMode.WorkersAskChief:
            answer = bool(self._dist.broadcast(answer))
        if answer and auto_ack:
            self.acknowledge_preemption_signal()
        return answer

    def acknowledge_preemption_signal(self) -> None:
        """Tells the platform the script is stopping (it then waits for the script instead of killing it)."""
        if self._dist.rank == 0 and not self._acknowledged:
            self._link.call("acknowledge_preemption")
            self._acknowledged = True
