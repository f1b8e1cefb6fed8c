"""The unit of work every room of the experiment manager acts in.

One transaction covers an event or a batch of them (nested `transaction()` calls join the outer
one). Inside it, rooms never write a trial row or a searcher snapshot directly and never talk to an
agent directly: they mark the trial or searcher changed (`save_trial`, `save_searcher`), ask for the
trial's next workloads (`dispatch`) and queue messages (`send`). At its end the trials' next
workloads are chosen once from the state it leaves, the changed rows are written from memory as the
database flushes (once, however many events changed them), and only after the commit do the held
messages go out; a rollback drops them. So no agent ever acts on something the database does not
hold, and a batch of agent messages costs one commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pedl._timeutil import utc_now
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import AgentHandle
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.wire import WORKLOAD_KINDS
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import searcher as searcher_ops
from pedl_scheduler.storage.ops import trials as trial_ops


class UnitOfWork:
    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self.db = db = state.db
        self._depth = 0
        # Trials whose next workloads are chosen at the end, messages held until the commit, and
        # rows written from memory when the transaction flushes.
        self._to_dispatch: dict[int, TrialRuntime] = {}
        self._outgoing: list[tuple[AgentHandle, agent_pb2.ConnectResponse]] = []
        self._after_commit: list[Callable[[], None]] = []
        self._dirty_trials: dict[int, TrialRuntime] = {}
        self._dirty_searchers: dict[int, ExperimentRuntime] = {}
        db.add_flush_hook(self._write_dirty)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction for an event or a batch of them (nested calls join the outer one).

        Trials' next workloads are chosen once, at its end, from the state it leaves; every message
        to agents is held until it commits and dropped if it rolls back, so no agent ever acts on
        something the database does not hold.
        """
        if self._depth:
            yield
            return
        self._depth = 1
        try:
            with self.db.transaction():
                yield
                while self._to_dispatch:
                    self.dispatch_now(self._to_dispatch.pop(next(iter(self._to_dispatch))))
        except BaseException:
            self._outgoing.clear()
            self._to_dispatch.clear()
            self._after_commit.clear()
            raise
        finally:
            self._depth = 0
        outgoing, self._outgoing = self._outgoing, []
        for agent, message in outgoing:
            agent.send(message)
        held, self._after_commit = self._after_commit, []
        for action in held:
            action()

    def send(self, agent: AgentHandle, message: agent_pb2.ConnectResponse) -> None:
        """Sends after the commit (now, outside a transaction)."""
        if self._depth:
            self._outgoing.append((agent, message))
        else:
            agent.send(message)

    def after_commit(self, action: Callable[[], None]) -> None:
        """Runs `action` once the transaction commits (now, outside one); a rollback drops it. For
        what acts outside the database on what it decided, e.g. the store deleting checkpoints."""
        if self._depth:
            self._after_commit.append(action)
        else:
            action()

    def dispatch(self, trial: TrialRuntime) -> None:
        """Sends the trial's next workloads (at the end of the transaction, when inside one)."""
        if self._depth:
            self._to_dispatch[trial.id] = trial
        else:
            self.dispatch_now(trial)

    def dispatch_now(self, trial: TrialRuntime) -> None:
        """Sends what the sequencer has decided behind the run's outstanding workloads (`pipeline`)."""
        if not trial.running or trial.busy_unknown or trial.killing:
            return
        agent = self.state.cluster.agents.get(trial.agent_id or "")
        if agent is None:
            return
        for nxt in trial.sequencer.pipeline(trial.outstanding):
            if nxt.kind is Kind.TERMINATE:
                trial.sequencer.on_terminate_sent()
                self.save_trial(trial)
                if self.state.trials_waiting and agent.accepts_handoffs:
                    self.state.wake.set()  # a queued trial may take its slots over
            else:
                trial.outstanding.append(nxt)
            self.send(
                agent,
                agent_pb2.ConnectResponse(
                    run_workload=agent_pb2.RunWorkload(
                        workload=common_pb2.Workload(
                            kind=WORKLOAD_KINDS[nxt.kind],
                            trial_id=trial.id,
                            run_id=trial.run_id,
                            step_id=nxt.step_id,
                            total_batches=nxt.total_batches,
                        )
                    )
                ),
            )

    def save_trial(self, trial: TrialRuntime) -> None:
        """Marks the trial's row for writing from memory when the transaction flushes (once, however
        many events of a batch changed it); outside a transaction it is written now."""
        trial.has_work = None
        self._dirty_trials[trial.id] = trial
        if not self.db.in_transaction:
            self.db.flush()

    def save_searcher(self, exp: ExperimentRuntime) -> None:
        """Marks the searcher's journal for writing when the transaction flushes (now, outside one)."""
        self._dirty_searchers[exp.id] = exp
        if not self.db.in_transaction:
            self.db.flush()

    def log_line(self, trial: TrialRuntime, message: str, source: str = "pedl") -> None:
        """A line in the trial's logs, written with the transaction that decided it."""
        result_ops.record_log(self.db, trial.id, trial.run_id, utc_now(), source, message)

    def _write_dirty(self) -> None:
        """The flush hook: writes the trial rows and searcher snapshots changed in memory."""
        if self._dirty_trials:
            trials, self._dirty_trials = self._dirty_trials, {}
            for trial in trials.values():
                self._write_trial(trial)
        if self._dirty_searchers:
            searchers, self._dirty_searchers = self._dirty_searchers, {}
            for exp in searchers.values():
                self._write_journal(exp)

    def _write_trial(self, trial: TrialRuntime) -> None:
        trial_ops.save_trial(
            self.db,
            trial.id,
            total_batches=trial.sequencer.batches_trained,
            checkpoint_uuid=trial.latest_checkpoint_uuid,
            checkpoint_batches=trial.latest_checkpoint_batches,
            checkpoint_step=trial.latest_checkpoint_step,
            sequencer_json=json.dumps(trial.sequencer.to_dict()),
            best_validation=trial.best_validation,
            waiting_on=trial.waiting_on,
        )

    def _write_journal(self, exp: ExperimentRuntime) -> None:
        """The searcher's new events, or a snapshot covering them (`SearcherJournal`)."""
        flush = exp.journal.flush()
        if flush is None:
            return
        if flush.snapshot is not None:
            experiment_ops.save_searcher_snapshot(self.db, exp.id, flush.snapshot, flush.seq)
            if flush.drop_events:
                searcher_ops.drop_events_through(self.db, exp.id, flush.seq)
        for seq, event in flush.events:
            searcher_ops.journal_event(self.db, exp.id, seq, event)
