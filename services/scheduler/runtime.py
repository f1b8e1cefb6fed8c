"""In-memory companions of active experiments and trials; the database stays the truth."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pedl.searcher import SearchMethod
from pedl.sequencer import Next, TrialSequencer
from pedl_scheduler.searcher_journal import SearcherJournal

if TYPE_CHECKING:
    from pedl.v1 import common_pb2
    from pedl_scheduler.experiments.failures import RunFailure


@dataclass
class ExperimentRuntime:
    id: int
    config: Any  # pedl.config.ExperimentConfig
    searcher: SearchMethod
    # Every event goes to the searcher through this, so that it is stored (pedl_scheduler.searcher_journal).
    journal: SearcherJournal
    state: str = "ACTIVE"
    searcher_done: bool = False
    searcher_failed: bool = False
    trial_ids: list[int] = field(default_factory=list)
    # The live (not ended) trials by searcher request id: the hot paths look trials up here
    # instead of scanning every trial the experiment ever had.
    live: dict[str, TrialRuntime] = field(default_factory=dict)
    # The live trials holding a checkpoint (by id): the ones garbage collection must not rob.
    checkpointed: dict[int, TrialRuntime] = field(default_factory=dict)
    # What every StartTrial of the experiment repeats, computed once (None until first needed).
    start_config: str | None = None
    model_definition_name: str | None = None
    model_definition_sha256: str | None = None
    # The checkpoint each trial without one of its own starts from (a warm start); "" for none.
    warm_start_uuid: str = ""
    # The best searcher metric any of its trials validated to (checkpoint_policy: best).
    best_validation: float | None = None
    # The checkpoint ledger for the save_* policy, built on first use (pedl_scheduler.checkpoint_gc).
    gc: Any = None


@dataclass
class TrialRuntime:
    id: int
    experiment_id: int
    request_id: str
    hparams: dict[str, Any]
    seed: int
    sequencer: TrialSequencer
    run_id: int = 0
    restarts: int = 0
    latest_checkpoint_uuid: str = ""
    latest_checkpoint_batches: int = 0
    latest_checkpoint_step: int = 0
    state: str = "ACTIVE"
    # The chief's agent (rank 0: it gets the workloads) and its slots.
    agent_id: str | None = None
    slot_ids: tuple[str, ...] = ()
    # A gang over several agents: the other agents and their slots.
    peers: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Workloads sent to the current run whose results have not come back, oldest first.
    outstanding: list[Next] = field(default_factory=list)
    # An adopted run that said it was busy: what it holds is unknown until its next result.
    busy_unknown: bool = False
    killing: bool = False
    best_validation: float | None = None
    # While set (a monotonic time), the trial may still be running on an agent that has not
    # reported in yet (after an agent's stream broke, or a scheduler restart): it is neither
    # rescheduled nor failed before then.
    unconfirmed_until: float | None = None
    # When this run started, relative to other runs (younger trials are preempted first).
    started_order: int = 0
    # When the scheduler gave this run its slots (seconds since the epoch): the timeline's first point.
    assigned_at: float = 0.0
    # Set while the trial waits for the trial it copies (PBT, ASHA resume) to save a checkpoint.
    waiting_on: int | None = None
    # Cached SchedulingPass.has_work (None: unknown); reset whenever the trial's state changes.
    has_work: bool | None = None
    # How the previous run failed (None: it did not, or without a signature); in memory only, so a
    # scheduler restart costs a deterministic failure one more run.
    last_failure: RunFailure | None = None
    # A restarted trial is not placed before this monotonic time (restart_policy.RestartBackoff).
    not_before: float | None = None
    # Failures of the infrastructure in a row (the store unreachable, the agent lost): they pace the
    # backoff and never spend `max_restarts`. Reset by the next workload result.
    infrastructure_failures: int = 0
    # Why the trial waits instead of training (shown by describe); "" while nothing holds it up.
    waiting_reason: str = ""
    # A gang whose work is done ends when every member's agent has reported its exit (each sends
    # its ranks' last log lines first): the agents not heard from yet, and until when (monotonic)
    # they are waited for before their ranks are killed. None: no member has exited yet.
    exits_awaited: set[str] | None = None
    exits_deadline: float = 0.0
    # The chief's timeline, kept until the whole gang has exited.
    exit_timeline: list[common_pb2.TimelinePhase] = field(default_factory=list)

    def gang_agents(self) -> list[str]:
        return ([self.agent_id] if self.agent_id else []) + [agent_id for agent_id, _ in self.peers]

    @property
    def in_flight(self) -> bool:
        """Whether the run holds work whose result has not come back yet."""
        return bool(self.outstanding) or self.busy_unknown

    @property
    def running(self) -> bool:
        return self.agent_id is not None

    @property
    def terminal(self) -> bool:
        return self.state in ("COMPLETED", "ERROR", "CANCELED")
