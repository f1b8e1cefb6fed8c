"""What one room asks of the others, as typed values the dispatcher (`dispatcher.py`) carries out.

The state machine's effects (`machine.Effect`) say what an experiment's decision needs; these say
what a room's own work needs from a room it does not hold (no room references another): a run
started or given up on, a loaded experiment's waiting children looking again. What a room observes
that the machine decides on (the searcher's operations, a checkpoint stored) it emits as the
machine's event. A room passes them, with the experiment and trials they concern, to the
`Emit` it was built with; the dispatcher runs them in order inside the room's unit of work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pedl_scheduler.cluster import AgentHandle
from pedl_scheduler.experiments import machine
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime


@dataclass(frozen=True)
class ResumeWaits:
    """A loaded experiment's children waiting on a parent's checkpoint look again (the parent may be gone)."""


@dataclass(frozen=True)
class StartRun:
    """Start the trial's run on these agents' slots (the first holds the chief, rank 0)."""

    trial_id: int
    gang: Sequence[tuple[AgentHandle, tuple[str, ...]]]


@dataclass(frozen=True)
class EndStragglers:
    """Gang members that did not report their exit in time are killed; the trial's work was done."""

    trial_id: int


# What a room may emit: these, the machine's effects, and the machine's events a room observed.
Step = (
    ResumeWaits
    | StartRun
    | EndStragglers
    | machine.Effect
    | machine.AgentLost
    | machine.ResultsRefused
    | machine.SearcherDecided
    | machine.CheckpointStored
)
Emit = Callable[[ExperimentRuntime, Sequence[TrialRuntime], Sequence[Step]], None]
