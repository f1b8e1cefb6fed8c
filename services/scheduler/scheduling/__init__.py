"""Slot scheduling decisions: a pure function of the cluster state.

The scheduler builds a `ClusterState` once per tick, calls `decide`, then starts the
assigned trials and asks the preempted ones to checkpoint and stop.
"""

from pedl_scheduler.scheduling.policy import decide
from pedl_scheduler.scheduling.share import weighted_shares
from pedl_scheduler.scheduling.state import (
    DEFAULT_ENVIRONMENT,
    DEFAULT_POOL,
    DEFAULT_PRIORITY,
    Agent,
    Allocation,
    ClusterState,
    Decision,
    ExperimentResources,
    QueuedTrial,
    RunningTrial,
    SchedulingPolicy,
)

__all__ = [
    "DEFAULT_ENVIRONMENT",
    "DEFAULT_POOL",
    "DEFAULT_PRIORITY",
    "Agent",
    "Allocation",
    "ClusterState",
    "Decision",
    "ExperimentResources",
    "QueuedTrial",
    "RunningTrial",
    "SchedulingPolicy",
    "decide",
    "weighted_shares",
]
