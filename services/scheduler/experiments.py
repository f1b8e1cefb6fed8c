"""The experiment and trial lifecycle: searcher operations in, workloads and DB rows out.

All state changes happen on the scheduler's event loop. Every event that moves a
searcher writes its snapshot in the same transaction as the rows the event produced, so
a restarted scheduler resumes the search exactly.

Agent messages that arrive together are handled in ONE transaction (`on_agent_messages`:
group commit), and every message to agents is sent only after the transaction that decided
it committed (`_txn`). A result the scheduler has not committed was therefore never acted
on: after a crash its workload is sent again (workloads carry absolute batch counts) or the
trial resumes from its last committed checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import structlog
from google.protobuf import json_format, struct_pb2

from pedl import _trial_token
from pedl._metrics import to_struct
from pedl._timeutil import utc_now
from pedl.config import ConfigError, parse_experiment_config
from pedl.config.stored import parse_stored_config
from pedl.searcher import (
    Close,
    Create,
    MetricError,
    Operation,
    Shutdown,
    ValidateAfter,
    is_better,
    make_search_method,
    restore_search_method,
    searcher_metric,
)
from pedl.sequencer import Kind, TrialSequencer
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler import metrics as prometheus
from pedl_scheduler import scheduling, script_results
from pedl_scheduler.checkpoint_deleter import CheckpointDeleter
from pedl_scheduler.checkpoint_gc import CheckpointLedger, CheckpointRef, GCPolicy
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.db import Database
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime
from pedl_scheduler.scheduling.placement import PoolSlots
from pedl_scheduler.searcher_journal import SearcherJournal

log = structlog.get_logger(component="experiments")

WORKLOAD_KINDS = {kind: common_pb2.WorkloadKind.Value(f"WORKLOAD_KIND_{kind.value}") for kind in Kind}
KIND_NAMES = {value: kind for kind, value in WORKLOAD_KINDS.items()}


# Rendezvous ports of gangs over several agents: this base plus the trial id modulo 1000.
RENDEZVOUS_BASE_PORT = 29500

SAVE_TRIAL = (
    "UPDATE trials SET total_batches = ?, latest_checkpoint_uuid = ?, latest_checkpoint_batches = ?, "
    "latest_checkpoint_step = ?, sequencer_json = ?, best_validation = ?, waiting_on_trial_id = ? "
    "WHERE id = ?"
)
SAVE_SNAPSHOT = "UPDATE experiments SET searcher_snapshot = ?, searcher_seq = ? WHERE id = ?"
INSERT_LOG = "INSERT INTO trial_logs (trial_id, run_id, timestamp, source, message) VALUES (?, ?, ?, ?, ?)"


class UserError(ValueError):
    """A request the user must fix; its message is shown as is."""


class NotFound(LookupError):
    pass


class ExperimentManager:
    def __init__(
        self,
        db: Database,
        cluster: Cluster,
        checkpoint_store_address: str,
        model_definition_limit: int = 96 * 1024 * 1024,
        reconnect_grace: float = 30.0,
    ) -> None:
        self.db = db
        self.cluster = cluster
        self.checkpoint_store_address = checkpoint_store_address
        self.model_definition_limit = model_definition_limit
        self.reconnect_grace = reconnect_grace
        self.experiments: dict[int, ExperimentRuntime] = {}
        self.trials: dict[int, TrialRuntime] = {}
        self.policy = scheduling.SchedulingPolicy()
        self.deleter = CheckpointDeleter(checkpoint_store_address, self._mark_deleted)
        # Signs each run's checkpoint-store credential (pedl._trial_token); None without auth.
        self.cluster_secret: str | None = None
        self._starts = 0
        # Whether the last scheduling pass left trials queued: a run told to terminate then wakes
        # the scheduler, so one of them can take its slots over (a handoff).
        self._trials_waiting = False
        # Indexes the hot paths use instead of scanning every live trial (a search may queue
        # thousands): the trials holding slots, and the children waiting on each parent's checkpoint.
        self._running: dict[int, TrialRuntime] = {}
        self._children: dict[int, set[int]] = {}
        self.wake = asyncio.Event()
        self.changed = asyncio.Condition()
        self._notifying = False
        self._batch_time: str | None = None
        # Transaction bookkeeping (`_txn`): trials whose next workloads are chosen at its end,
        # messages held until it commits, and rows written from memory when it flushes.
        self._txn_depth = 0
        self._to_dispatch: dict[int, TrialRuntime] = {}
        self._outgoing: list[tuple[AgentHandle, agent_pb2.ConnectResponse]] = []
        self._dirty_trials: dict[int, TrialRuntime] = {}
        self._dirty_searchers: dict[int, ExperimentRuntime] = {}
        db.add_flush_hook(self._write_dirty)

    # ---- start-up -------------------------------------------------------------------------

    def recover(self) -> None:
        """Rebuilds active experiments from the database; their live trials are queued again."""
        for row in self.db.query("SELECT * FROM experiments WHERE state IN ('ACTIVE', 'PAUSED')"):
            config = parse_stored_config(json.loads(row["config_json"]))
            searcher = restore_search_method(config, row["seed"], json.loads(row["searcher_snapshot"]))
            exp = ExperimentRuntime(row["id"], config, searcher, state=row["state"])
            exp.journal = SearcherJournal(searcher, row["searcher_seq"], len(row["searcher_snapshot"]))
            exp.journal.replay(
                (e["seq"], e["event_json"])
                for e in self.db.query(
                    "SELECT seq, event_json FROM searcher_events WHERE experiment_id = ? AND seq > ? "
                    "ORDER BY seq",
                    (exp.id, row["searcher_seq"]),
                )
            )
            self.experiments[exp.id] = exp
            for t in self.db.query("SELECT * FROM trials WHERE experiment_id = ? ORDER BY id", (exp.id,)):
                exp.trial_ids.append(t["id"])
                if t["state"] not in ("ACTIVE", "PAUSED"):
                    continue
                trial = TrialRuntime(
                    id=t["id"],
                    experiment_id=exp.id,
                    request_id=t["request_id"],
                    hparams=json.loads(t["hparams_json"]),
                    seed=t["seed"],
                    sequencer=TrialSequencer.from_dict(json.loads(t["sequencer_json"])),
                    run_id=t["run_id"],
                    restarts=t["restarts"],
                    latest_checkpoint_uuid=t["latest_checkpoint_uuid"],
                    latest_checkpoint_batches=t["latest_checkpoint_batches"],
                    latest_checkpoint_step=t["latest_checkpoint_step"],
                    state=t["state"],
                    best_validation=t["best_validation"],
                )
                self.trials[trial.id] = trial
                exp.live[trial.request_id] = trial
                self._wait_for(trial, t["waiting_on_trial_id"])
                self._holds_checkpoint(trial)
            for trial_id in exp.trial_ids:
                child = self.trials.get(trial_id)
                if child is not None and child.waiting_on is not None:
                    self._resume_wait_for_parent(child, child.waiting_on)
            log.info("experiment recovered", experiment_id=exp.id, trials=len(exp.trial_ids))
        self.wake.set()

    # ---- user requests --------------------------------------------------------------------

    def create_experiment(self, config_yaml: str, model_definition: bytes, name: str, owner: str = "") -> int:
        try:
            config = parse_experiment_config(config_yaml)
        except ConfigError as e:
            raise UserError(f"invalid experiment config: {e}") from e
        if not model_definition:
            raise UserError("the model definition is empty: submit a context directory holding the code")
        if len(model_definition) > self.model_definition_limit:
            raise UserError(
                f"the model definition is {len(model_definition) / 2**20:.1f} MiB compressed, over the "
                f"scheduler's limit of {self.model_definition_limit / 2**20:.0f} MiB; "
                "leave large files out with .pedlignore"
            )
        if not name.isidentifier():
            raise UserError(f"model_definition_name {name!r} is not a valid Python identifier")
        self._check_environment(config.environment_name)
        self._check_fits(config)
        seed = config.experiment_seed if config.experiment_seed is not None else random.randrange(2**31)
        searcher = make_search_method(config, seed)
        with self._txn():
            exp_id = self.db.execute(
                "INSERT INTO experiments (state, config_yaml, config_json, model_definition, "
                "model_definition_name, seed, created_at, owner) VALUES ('ACTIVE', ?, ?, ?, ?, ?, ?, ?)",
                (
                    config.masked_yaml(),
                    json.dumps(config.raw),
                    model_definition,
                    name,
                    seed,
                    utc_now(),
                    owner,
                ),
            )
            exp = ExperimentRuntime(exp_id, config, searcher, journal=SearcherJournal(searcher))
            self.experiments[exp_id] = exp
            self._apply(exp, exp.journal.call("initial_operations"))
        log.info("experiment created", experiment_id=exp_id, searcher=config.searcher_name)
        self.wake.set()
        return exp_id

    def _check_environment(self, name: str | None) -> None:
        """A Python environment no connected agent offers could never run (checked, like slots, only
        while agents are connected, so that experiments may be queued before agents join)."""
        if not name or name == "default" or not self.cluster.agents:
            return
        offered = sorted({e for a in self.cluster.agents.values() for e in a.environments})
        if name not in offered:
            raise UserError(
                f"environment {name!r} is not offered by any connected agent; they offer: "
                f"{', '.join(offered)} (agents offer more with --environment {name}=/path/to/python)"
            )

    def _check_fits(self, config: Any) -> None:
        """A trial no arrangement of the connected agents could ever hold is refused up front."""
        pool = config.resources.get("resource_pool") or scheduling.DEFAULT_POOL
        environment = config.environment_name or scheduling.DEFAULT_ENVIRONMENT
        agents = [a for a in self.cluster.agents.values() if a.resource_pool == pool]
        if not agents:
            return  # agents may still join
        slots = config.slots_per_trial
        shape = PoolSlots([_scheduling_agent(a, free_slots=()) for a in agents])
        if not shape.could_ever_fit(slots, environment):
            eligible = [a for a in agents if environment in a.environments]
            sizes = ", ".join(str(len(a.slots)) for a in eligible) or "no"
            total = sum(len(a.slots) for a in eligible)
            raise UserError(
                f"resources.slots_per_trial is {slots}, but the {len(eligible)} agents of pool {pool!r} "
                f"offering environment {environment!r} (with {sizes} slots, {total} in all) cannot hold "
                "it: a trial takes slots on one agent, or whole agents of one size"
            )

    def kill_experiment(self, exp_id: int) -> None:
        row = self.db.query_one("SELECT state FROM experiments WHERE id = ?", (exp_id,))
        if row is None:
            raise NotFound(f"experiment {exp_id} not found")
        exp = self.experiments.get(exp_id)
        if exp is None:
            return  # already ended
        exp.state = "CANCELED"
        with self._txn():
            for trial_id in exp.trial_ids:
                trial = self.trials.get(trial_id)
                if trial is None or trial.terminal:
                    continue
                trial.killing = True
                if trial.running:
                    self._kill_run(trial)
                else:
                    self._end_trial(trial, "CANCELED", "")
            self._maybe_finish(exp)
        self._notify()

    # ---- scheduling -----------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """The scheduling loop's periodic work: lost runs, then one scheduling pass in one transaction."""
        self.wake.clear()
        self.expire_unconfirmed(now)
        with self._txn():
            self.schedule()

    def schedule(self) -> None:
        """One tick: start queued trials on free slots, and ask preempted ones to stop."""
        state = self._cluster_state()
        decision = scheduling.decide(state, self.policy)
        for trial_id in decision.preemptions:
            trial = self.trials[trial_id]
            if not trial.sequencer.stop_requested:
                self._log_line(
                    trial,
                    f"trial {trial.id} is preempted by higher-priority work: it checkpoints "
                    "and will resume when slots free up",
                )
                self._request_stop(trial)
        waiting = {t.trial_id for t in state.queued} - set(decision.assignments)
        self._trials_waiting = bool(waiting)
        if waiting:
            self._yield_idle_slots()
        for trial_id, allocations in decision.assignments.items():
            gang = [(self.cluster.agents[a.agent_id], a.slot_ids) for a in allocations]
            self._start(self.trials[trial_id], gang)

    def _cluster_state(self) -> scheduling.ClusterState:
        running, queued = [], []
        exiting: set[int] = set()  # told to terminate: their slots may be handed off
        agents = self.cluster.agents
        # One pass can place at most this many trials (free and handoff slots, CPU-only trials) and
        # serves an experiment's trials oldest first, so only its oldest queued ones need be shown
        # to the policy: a search that queues thousands costs a pass no more than one that queues few.
        window = 2 * sum(max(len(a.slots), 1) for a in agents.values()) + 1
        for t in self._running.values():
            if t.sequencer.terminated:
                exiting.add(t.id)
            held = [(t.agent_id or "", t.slot_ids), *t.peers]
            # Slots already handed off count as the next trial's, not this one's.
            allocations = tuple(
                scheduling.Allocation(a, _not_handed_off(agents.get(a), slots)) for a, slots in held
            )
            if any(slots for _, slots in held) and not any(a.slot_ids for a in allocations):
                continue
            running.append(
                scheduling.RunningTrial(
                    t.id,
                    t.experiment_id,
                    allocations,
                    preempting=t.sequencer.stop_requested or t.sequencer.terminated,
                    order=t.started_order,
                )
            )
        for exp in self.experiments.values():
            if exp.state != "ACTIVE":
                continue
            shown = 0
            for t in exp.live.values():  # oldest first (created, recovered in id order)
                if shown >= window:
                    break
                if (
                    not t.running
                    and t.state == "ACTIVE"
                    and not t.killing
                    and t.unconfirmed_until is None
                    and t.waiting_on is None
                    and self._has_work(t)
                ):
                    shown += 1
                    queued.append(
                        scheduling.QueuedTrial(
                            t.id,
                            t.experiment_id,
                            exp.config.slots_per_trial,
                            exp.config.resources.get("resource_pool") or scheduling.DEFAULT_POOL,
                            order=t.id,
                            environment=exp.config.environment_name or scheduling.DEFAULT_ENVIRONMENT,
                        )
                    )
        experiments = {
            e.id: scheduling.ExperimentResources(
                e.id,
                weight=float(e.config.resources.get("weight", 1)),
                max_slots=e.config.resources.get("max_slots"),
                priority=e.config.resources.get("priority") or scheduling.DEFAULT_PRIORITY,
            )
            for e in self.experiments.values()
        }
        offered = [
            _scheduling_agent(a, a.free_slots(), a.handoff_slots(exiting) if exiting else ())
            for a in agents.values()
        ]
        return scheduling.ClusterState(offered, running, queued, experiments)

    def _yield_idle_slots(self) -> None:
        """Trials idle until the searcher hears from others (a PBT round) give their slots to queued ones.

        Without this, a population larger than the cluster would wait forever on itself.
        """
        for trial in list(self._running.values()):
            if (
                trial.running
                and not trial.in_flight
                and not trial.sequencer.stop_requested
                and trial.sequencer.next_workload() is None
            ):
                self._log_line(
                    trial, f"trial {trial.id} waits for the searcher; it releases its slots meanwhile"
                )
                self._request_stop(trial)

    def _has_work(self, trial: TrialRuntime) -> bool:
        """Whether a (re)started run of the trial would have a workload to do now.

        Cached until the trial's state changes (`_save_trial`, an exit): every scheduling pass asks
        it of every queued trial, and a search may queue thousands.
        """
        if trial.has_work is None:
            probe = trial.sequencer.clone()
            probe.restart_from(trial.latest_checkpoint_batches, trial.latest_checkpoint_step)
            trial.has_work = probe.next_workload() is not None
        return trial.has_work

    def _request_stop(self, trial: TrialRuntime) -> None:
        """Checkpoint at the next step boundary, then exit; the trial resumes later (pause, preemption)."""
        with self._txn():
            trial.sequencer.request_stop()
            self._save_trial(trial)
            self._dispatch(trial)

    def pause_experiment(self, exp_id: int) -> None:
        exp = self._live_experiment(exp_id)
        if exp.state != "ACTIVE":
            return
        exp.state = "PAUSED"
        with self._txn():
            self.db.execute("UPDATE experiments SET state = 'PAUSED' WHERE id = ?", (exp_id,))
            for trial in self._live_trials(exp):
                if trial.running:
                    self._request_stop(trial)
                self._set_trial_state(trial, "PAUSED")
        self._notify()

    def activate_experiment(self, exp_id: int) -> None:
        exp = self._live_experiment(exp_id)
        if exp.state != "PAUSED":
            return
        exp.state = "ACTIVE"
        with self._txn():
            self.db.execute("UPDATE experiments SET state = 'ACTIVE' WHERE id = ?", (exp_id,))
            for trial in self._live_trials(exp):
                self._set_trial_state(trial, "ACTIVE")
        self.wake.set()
        self._notify()

    def _live_experiment(self, exp_id: int) -> ExperimentRuntime:
        row = self.db.query_one("SELECT state FROM experiments WHERE id = ?", (exp_id,))
        if row is None:
            raise NotFound(f"experiment {exp_id} not found")
        exp = self.experiments.get(exp_id)
        if exp is None:
            raise UserError(f"experiment {exp_id} has already ended ({row['state']})")
        return exp

    def _live_trials(self, exp: ExperimentRuntime) -> list[TrialRuntime]:
        return [self.trials[t] for t in exp.trial_ids if t in self.trials]

    def _set_trial_state(self, trial: TrialRuntime, state: str) -> None:
        trial.state = state
        self.db.defer("UPDATE trials SET state = ? WHERE id = ?", (state, trial.id))

    def _start(self, trial: TrialRuntime, gang: list[tuple[AgentHandle, tuple[str, ...]]]) -> None:
        """Starts a run on one agent, or as a gang over several (the first holds the chief, rank 0)."""
        with self._txn():
            self._start_run(trial, gang)

    def _start_run(self, trial: TrialRuntime, gang: list[tuple[AgentHandle, tuple[str, ...]]]) -> None:
        exp = self.experiments[trial.experiment_id]
        (agent, slot_ids), others = gang[0], gang[1:]
        trial.run_id += 1
        self._starts += 1
        trial.started_order = self._starts
        trial.agent_id = agent.id
        self._running[trial.id] = trial
        trial.slot_ids = slot_ids
        trial.peers = tuple((a.id, slots) for a, slots in others)
        trial.outstanding, trial.busy_unknown = [], False
        trial.sequencer.restart_from(trial.latest_checkpoint_batches, trial.latest_checkpoint_step)
        after: dict[str, list[int]] = {}  # per agent: trials whose slots this run takes over as they exit
        for member, slots in gang:
            for slot_id in slots:
                holder = member.hold(slot_id, trial.id)
                if holder is not None and holder not in after.setdefault(member.id, []):
                    after[member.id].append(holder)
        self.db.defer(
            "UPDATE trials SET run_id = ?, sequencer_json = ?, "
            "start_time = CASE WHEN start_time = '' THEN ? ELSE start_time END WHERE id = ?",
            (trial.run_id, json.dumps(trial.sequencer.to_dict()), utc_now(), trial.id),
        )
        env = exp.config.environment_name or ""
        world_size = sum(len(slots) for _, slots in gang)
        # The chief's rank 0 listens here for the other ranks (only needed across agents).
        rendezvous = (
            f"{agent.address or '127.0.0.1'}:{RENDEZVOUS_BASE_PORT + trial.id % 1000}" if others else ""
        )
        if exp.start_config is None:
            exp.start_config = json.dumps(exp.config.raw)
        rank = 0
        for member, slots in gang:
            self._send(
                member,
                agent_pb2.ConnectResponse(
                    start_trial=agent_pb2.StartTrial(
                        trial_id=trial.id,
                        run_id=trial.run_id,
                        experiment_id=exp.id,
                        config_yaml=exp.start_config,
                        hparams=to_struct(trial.hparams),
                        latest_checkpoint_uuid=trial.latest_checkpoint_uuid,
                        latest_checkpoint_batches=trial.latest_checkpoint_batches,
                        slot_ids=list(slots),
                        trial_seed=trial.seed,
                        checkpoint_store_address=self.checkpoint_store_address,
                        model_definition_name=self._model_definition_name(exp),
                        rank=rank,
                        world_size=world_size,
                        rendezvous_address=rendezvous,
                        environment="" if env == "default" else env,
                        checkpoint_token=self._checkpoint_token(exp.id, trial.id),
                        after=[
                            agent_pb2.RunRef(trial_id=h, run_id=self.trials[h].run_id)
                            for h in after.get(member.id, ())
                        ],
                    )
                ),
            )
            rank += len(slots)
        placement = "; ".join(f"agent {m.id} (slots {', '.join(slots)})" for m, slots in gang)
        handoff = sorted({h for holders in after.values() for h in holders})
        if handoff:
            placement += f", taking them over from trial {', '.join(map(str, handoff))} as it exits"
        self._log_line(trial, f"trial {trial.id} run {trial.run_id} started on {placement}")
        log.info("trial started", trial_id=trial.id, run_id=trial.run_id, agent_id=agent.id, gang=len(gang))
        self._dispatch(trial)

    def _checkpoint_token(self, exp_id: int, trial_id: int) -> str:
        return _trial_token.mint(self.cluster_secret, exp_id, trial_id) if self.cluster_secret else ""

    def _model_definition_name(self, exp: ExperimentRuntime) -> str:
        if exp.model_definition_name is None:
            row = self.db.query_one("SELECT model_definition_name FROM experiments WHERE id = ?", (exp.id,))
            exp.model_definition_name = row["model_definition_name"] if row else ""
        return exp.model_definition_name

    # ---- transactions and workloads --------------------------------------------------------

    @contextmanager
    def _txn(self) -> Iterator[None]:
        """One transaction for an event or a batch of them (nested calls join the outer one).

        Trials' next workloads are chosen once, at its end, from the state it leaves; every message
        to agents is held until it commits and dropped if it rolls back, so no agent ever acts on
        something the database does not hold.
        """
        if self._txn_depth:
            yield
            return
        self._txn_depth = 1
        try:
            with self.db.transaction():
                yield
                while self._to_dispatch:
                    self._dispatch_now(self._to_dispatch.pop(next(iter(self._to_dispatch))))
        except BaseException:
            self._outgoing.clear()
            self._to_dispatch.clear()
            raise
        finally:
            self._txn_depth = 0
        outgoing, self._outgoing = self._outgoing, []
        for agent, message in outgoing:
            agent.send(message)

    def _send(self, agent: AgentHandle, message: agent_pb2.ConnectResponse) -> None:
        if self._txn_depth:
            self._outgoing.append((agent, message))
        else:
            agent.send(message)

    def _dispatch(self, trial: TrialRuntime) -> None:
        """Sends the trial's next workloads (at the end of the transaction, when inside one)."""
        if self._txn_depth:
            self._to_dispatch[trial.id] = trial
        else:
            self._dispatch_now(trial)

    def _dispatch_now(self, trial: TrialRuntime) -> None:
        """Sends what the sequencer has decided behind the run's outstanding workloads (`pipeline`)."""
        if not trial.running or trial.busy_unknown or trial.killing:
            return
        agent = self.cluster.agents.get(trial.agent_id or "")
        if agent is None:
            return
        for nxt in trial.sequencer.pipeline(trial.outstanding):
            if nxt.kind is Kind.TERMINATE:
                trial.sequencer.on_terminate_sent()
                self._save_trial(trial)
                if self._trials_waiting and agent.accepts_handoffs:
                    self.wake.set()  # a queued trial may take its slots over
            else:
                trial.outstanding.append(nxt)
            self._send(
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

    @staticmethod
    def _retire(trial: TrialRuntime, w: common_pb2.Workload) -> None:
        """Forgets the outstanding workload `w` answers (a stale duplicate answers none)."""
        kind = KIND_NAMES.get(w.kind)
        for i, sent in enumerate(trial.outstanding):
            if sent.kind is kind and sent.total_batches == w.total_batches and sent.step_id == w.step_id:
                del trial.outstanding[i]
                return

    # ---- agent events ---------------------------------------------------------------------

    def on_agent_registered(self, agent: AgentHandle, running: list[agent_pb2.RunningTrial]) -> None:
        """Adopts the runs the agent still has that are current here, and stops the rest.

        Trials this scheduler placed on the agent that it no longer reports get a short
        deadline: their exit may still be in the agent's backlog, which follows the register.
        A run that says it is busy holds workloads (or results) this scheduler may not know of:
        nothing more is sent to it until its next result.
        """
        with self._txn():
            self._adopt_runs(agent, running)
        self.wake.set()

    def _adopt_runs(self, agent: AgentHandle, running: list[agent_pb2.RunningTrial]) -> None:
        reported = set()
        # Runs that hold their slots first: a waiting one takes its slots over from them (a handoff).
        for r in sorted(running, key=lambda r: r.waiting):
            trial = self.trials.get(r.trial_id)
            adoptable = (
                trial is not None
                and trial.run_id == r.run_id
                and not trial.killing
                and trial.agent_id in (None, agent.id)
                and (trial.running or trial.unconfirmed_until is not None)
            )
            if not adoptable:
                self._send(
                    agent,
                    agent_pb2.ConnectResponse(
                        kill_trial=agent_pb2.KillTrial(trial_id=r.trial_id, run_id=r.run_id)
                    ),
                )
                continue
            assert trial is not None
            reported.add(trial.id)
            trial.agent_id, trial.slot_ids = agent.id, tuple(r.slot_ids)
            self._running[trial.id] = trial
            trial.unconfirmed_until = None
            trial.outstanding, trial.busy_unknown = [], r.busy
            for slot_id in r.slot_ids:
                agent.hold(slot_id, trial.id)
            self._log_line(trial, f"trial {trial.id} run {trial.run_id} continues on agent {agent.id}")
            log.info("trial run adopted", trial_id=trial.id, run_id=trial.run_id, agent_id=agent.id)
            self._dispatch(trial)
        deadline = time.monotonic() + min(self.reconnect_grace, 5.0)
        for trial in self.trials.values():
            if trial.agent_id == agent.id and trial.id not in reported:
                trial.unconfirmed_until = deadline

    def on_agent_disconnected(self, agent_id: str) -> None:
        """The agent's trials may still be running: wait for it to reconnect, up to the grace period."""
        deadline = time.monotonic() + self.reconnect_grace
        for trial in self.trials.values():
            if agent_id in trial.gang_agents():
                trial.unconfirmed_until = deadline
        self.wake.set()

    def expire_unconfirmed(self, now: float) -> None:
        """Trials whose agent did not report them in time are treated as lost (and restarted)."""
        for trial in [t for t in self.trials.values() if t.unconfirmed_until is not None]:
            if trial.unconfirmed_until is not None and now >= trial.unconfirmed_until:
                trial.unconfirmed_until = None
                if trial.agent_id is not None:
                    self._on_exit(trial, exit_code=-1, error=f"agent {trial.agent_id} was lost", killed=False)

    def on_agent_messages(self, batch: Sequence[tuple[AgentHandle, agent_pb2.ConnectRequest]]) -> None:
        """Handles agent messages that arrived together, in order, in ONE transaction (group commit).

        Durability is that of one transaction per message: nothing the batch decided (workloads,
        starts, kills) leaves before the commit, and an agent that saw nothing cannot have acted on
        a result the scheduler then lost. A trial that ended in the batch frees its slots for the
        queued trials at once, not at the next scheduling tick.
        """
        self._batch_time = utc_now()  # one commit, one timestamp for the rows it writes
        try:
            with self._txn():
                for agent, message in batch:
                    kind = message.WhichOneof("message")
                    if kind == "workload_completed":
                        self._workload_completed(agent, message.workload_completed.result)
                    elif kind == "trial_logs":
                        self._trial_logs(message.trial_logs)
                    elif kind == "trial_exited":
                        self.on_trial_exited(agent, message.trial_exited)
        finally:
            self._batch_time = None
        self._notify()
        if self.wake.is_set():
            self.wake.clear()
            try:
                with self._txn():
                    self.schedule()
            except Exception:
                self.wake.set()  # the scheduling loop tries again
                log.exception("scheduling after agent messages failed")

    def on_workload_completed(self, agent: AgentHandle, result: common_pb2.WorkloadResult) -> None:
        """One result alone (`on_agent_messages` handles what arrives together)."""
        with self._txn():
            self._workload_completed(agent, result)
        self._notify()

    def _workload_completed(self, agent: AgentHandle, result: common_pb2.WorkloadResult) -> None:
        w = result.workload
        trial = self._current(agent, w.trial_id, w.run_id)
        if trial is None:
            return
        trial.busy_unknown = False
        self._retire(trial, w)
        kind = KIND_NAMES.get(w.kind)
        now = self._batch_time or utc_now()
        try:
            if result.script_reports:
                script_results.record_reports(self, trial, result.script_reports, now)
            if kind is Kind.RUN_STEP:
                self._record_step(trial, w, result, now)
            elif kind is Kind.COMPUTE_VALIDATION_METRICS:
                self._record_validation(trial, w, metrics_plain(result.metrics), now)
            elif kind is Kind.CHECKPOINT_MODEL:
                self._record_checkpoint(trial, w, result.checkpoint, now)
        except UserError as e:  # raised before the result wrote anything
            self._fail_running_trial(trial, str(e))
            return
        self._save_trial(trial)
        self._dispatch(trial)

    def _record_step(
        self,
        trial: TrialRuntime,
        w: common_pb2.Workload,
        result: common_pb2.WorkloadResult,
        now: str,
    ) -> None:
        if result.HasField("script_progress"):  # a Core API script's: its reports are its steps
            script_results.step_completed(trial, w, result)
            return
        self.db.defer(
            "INSERT INTO steps (trial_id, step_id, total_batches, num_batches, metrics_json, end_time) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (trial.id, w.step_id, w.total_batches, result.num_batches, metrics_json(result.metrics), now),
        )
        trial.sequencer.on_step_completed(w.step_id, w.total_batches)
        prometheus.step_ingested()

    def _record_validation(
        self, trial: TrialRuntime, w: common_pb2.Workload, metrics: dict[str, Any], now: str
    ) -> None:
        exp = self.experiments[trial.experiment_id]
        try:
            value = searcher_metric(metrics, exp.config.searcher_metric)
        except MetricError as e:
            raise UserError(str(e)) from None
        self.db.defer(
            "INSERT INTO validations (trial_id, step_id, total_batches, metrics_json, end_time) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (trial.id, w.step_id, w.total_batches, json.dumps(metrics), now),
        )
        prometheus.validation_ingested()
        if exp.gc is not None:
            exp.gc.add_metric(trial.id, w.total_batches, value)
        if is_better(value, trial.best_validation, exp.config.smaller_is_better):
            trial.best_validation = value
        if trial.sequencer.on_validation_completed(w.total_batches):
            self._apply(
                exp,
                exp.journal.call("on_validation_completed", trial.request_id, float(value), w.total_batches),
            )

    def _record_checkpoint(
        self, trial: TrialRuntime, w: common_pb2.Workload, ckpt: common_pb2.Checkpoint, now: str
    ) -> None:
        if not ckpt.uuid:  # a Core API script's: it stopped, its checkpoints came as reports
            trial.sequencer.on_checkpoint_completed(w.total_batches)
            return
        self.db.defer(
            "INSERT INTO checkpoints (uuid, trial_id, step_id, total_batches, state, checkpoint_json, "
            "created_at) VALUES (?, ?, ?, ?, 'COMPLETED', ?, ?) ON CONFLICT DO NOTHING",
            (ckpt.uuid, trial.id, w.step_id, w.total_batches, json_format.MessageToJson(ckpt), now),
        )
        trial.latest_checkpoint_uuid = ckpt.uuid
        trial.latest_checkpoint_batches = w.total_batches
        trial.latest_checkpoint_step = w.step_id
        self._holds_checkpoint(trial)
        exp = self.experiments[trial.experiment_id]
        if exp.gc is not None:
            exp.gc.add_checkpoint(CheckpointRef(ckpt.uuid, trial.id, w.total_batches))
        copyable = trial.sequencer.requested_checkpoint_reached(w.total_batches)
        trial.sequencer.on_checkpoint_completed(w.total_batches)
        prometheus.checkpoint_recorded()
        if copyable:
            for child in self._waiting_children(trial.id):
                self._copy_checkpoint(child, trial.id, ckpt.uuid, w.total_batches, w.step_id)

    def _trial_logs(self, message: agent_pb2.TrialLogs) -> None:
        if message.trial_id not in self.trials and not self.db.query_one(
            "SELECT id FROM trials WHERE id = ?", (message.trial_id,)
        ):
            return
        for line in message.lines:
            self.db.defer(
                INSERT_LOG,
                (
                    message.trial_id,
                    message.run_id,
                    line.timestamp or utc_now(),
                    line.source or "stdout",
                    line.message,
                ),
            )

    def on_trial_exited(self, agent: AgentHandle, message: agent_pb2.TrialExited) -> None:
        trial = self._current(agent, message.trial_id, message.run_id)
        if trial is None:
            return
        self._on_exit(trial, message.exit_code, message.error, message.killed)

    def _on_exit(self, trial: TrialRuntime, exit_code: int, error: str, killed: bool) -> None:
        exp = self.experiments[trial.experiment_id]
        if trial.peers and not (exit_code == 0 and trial.sequencer.terminated):
            self._kill_run(trial)  # one member of a gang failed: the others cannot go on
        self.cluster.release(trial.id)
        trial.agent_id, trial.slot_ids, trial.peers = None, (), ()
        self._running.pop(trial.id, None)
        trial.outstanding, trial.busy_unknown = [], False
        trial.unconfirmed_until = None
        trial.has_work = None
        with self._txn():
            if trial.killing:
                self._end_trial(trial, "CANCELED", "")
            elif exit_code == 0 and trial.sequencer.terminated and not trial.sequencer.completed:
                self._log_line(
                    trial,
                    f"trial {trial.id} stopped at batch {trial.sequencer.batches_trained}; "
                    "it resumes from its checkpoint when scheduled again",
                )
                self._save_trial(trial)
            elif exit_code == 0 and trial.sequencer.terminated:
                self._end_trial(trial, "COMPLETED", "")
                self._apply(exp, exp.journal.call("on_trial_closed", trial.request_id))
            else:
                reason = error.strip() or f"the trial process exited with code {exit_code}"
                if exit_code == 0:
                    reason = "the trial process exited before it was told to stop"
                self._log_line(trial, f"trial {trial.id} failed: {reason}", source="pedl")
                if trial.restarts < exp.config.max_restarts:
                    self._restart(trial, exp)
                else:
                    if exp.config.max_restarts:
                        reason = (
                            f"{reason} (after {trial.restarts} restarts, max_restarts is "
                            f"{exp.config.max_restarts})"
                        )
                    self._end_trial(trial, "ERROR", reason)
                    self._apply(exp, exp.journal.call("on_trial_exited_early", trial.request_id))
            self._maybe_finish(exp)
        self.wake.set()
        self._notify()

    def _restart(self, trial: TrialRuntime, exp: ExperimentRuntime) -> None:
        """Queues the trial again; its next run resumes from its latest complete checkpoint."""
        trial.restarts += 1
        self.db.defer("UPDATE trials SET restarts = ? WHERE id = ?", (trial.restarts, trial.id))
        origin = (
            f"checkpoint {trial.latest_checkpoint_uuid} (batch {trial.latest_checkpoint_batches})"
            if trial.latest_checkpoint_uuid
            else "the beginning"
        )
        self._log_line(
            trial,
            f"restarting trial {trial.id} from {origin} "
            f"(restart {trial.restarts} of max_restarts {exp.config.max_restarts})",
        )
        log.info("trial restarting", trial_id=trial.id, restarts=trial.restarts)

    def _fail_running_trial(self, trial: TrialRuntime, reason: str) -> None:
        """A problem the scheduler found in a trial's results: stop the run, mark it ERROR."""
        exp = self.experiments[trial.experiment_id]
        self._kill_run(trial)
        self.cluster.release(trial.id)
        trial.agent_id, trial.slot_ids, trial.peers = None, (), ()
        self._running.pop(trial.id, None)
        trial.outstanding, trial.busy_unknown = [], False
        with self._txn():
            self._log_line(trial, f"trial {trial.id} failed: {reason}", source="pedl")
            self._end_trial(trial, "ERROR", reason)
            self._apply(exp, exp.journal.call("on_trial_exited_early", trial.request_id))
            self._maybe_finish(exp)
        self.wake.set()
        self._notify()

    def _kill_run(self, trial: TrialRuntime, skip: str | None = None) -> None:
        """Asks every agent of the trial's current run (but `skip`) to kill it."""
        for agent_id in trial.gang_agents():
            agent = self.cluster.agents.get(agent_id)
            if agent is not None and agent_id != skip:
                self._send(
                    agent,
                    agent_pb2.ConnectResponse(
                        kill_trial=agent_pb2.KillTrial(trial_id=trial.id, run_id=trial.run_id)
                    ),
                )

    def _current(self, agent: AgentHandle, trial_id: int, run_id: int) -> TrialRuntime | None:
        """The trial if the message is from its current run on this agent; stale messages are dropped."""
        trial = self.trials.get(trial_id)
        if trial is None or trial.run_id != run_id or agent.id not in trial.gang_agents():
            log.info("dropped message from a stale run", trial_id=trial_id, run_id=run_id, agent_id=agent.id)
            return None
        return trial

    # ---- searcher operations --------------------------------------------------------------

    def _apply(self, exp: ExperimentRuntime, ops: list[Operation]) -> None:
        """Acts on searcher operations; call inside a transaction."""
        pending = list(ops)
        while pending:
            op = pending.pop(0)
            if isinstance(op, Create):
                # The trials the searcher creates together are inserted together (one round trip);
                # targets and a close decided with each go into its first row.
                batch: list[tuple[Create, list[Operation]]] = []
                while True:
                    decided: list[Operation] = []
                    while (
                        pending
                        and isinstance(pending[0], (ValidateAfter, Close))
                        and pending[0].request_id == op.request_id
                    ):
                        decided.append(pending.pop(0))
                    batch.append((op, decided))
                    if not (pending and isinstance(pending[0], Create)):
                        break
                    op = pending.pop(0)
                for created in self._create_trials(exp, batch):
                    pending.extend(exp.journal.call("on_trial_created", created.request_id))
            elif isinstance(op, ValidateAfter):
                trial = self._by_request(exp, op.request_id)
                trial.sequencer.add_target(op.length)
                self._save_trial(trial)
                self._dispatch(trial)
            elif isinstance(op, Close):
                trial = self._by_request(exp, op.request_id)
                trial.sequencer.close()
                self._save_trial(trial)
                self._dispatch(trial)
            elif isinstance(op, Shutdown):
                exp.searcher_done = True
                exp.searcher_failed = exp.searcher_failed or op.failure
        self._dirty_searchers[exp.id] = exp  # its journal is written when the transaction flushes
        if not self.db.in_transaction:
            self.db.flush()
        self._maybe_finish(exp)

    def _create_trials(
        self, exp: ExperimentRuntime, batch: Sequence[tuple[Create, Sequence[Operation]]]
    ) -> list[TrialRuntime]:
        cfg = exp.config
        sequencers = []
        for op, decided in batch:
            sequencer = TrialSequencer.for_config(cfg)
            for d in decided:
                if isinstance(d, ValidateAfter):
                    sequencer.add_target(d.length)
                else:
                    sequencer.close()
            sequencers.append(sequencer)
            self.db.defer(
                "INSERT INTO trials (experiment_id, request_id, state, hparams_json, seed, sequencer_json) "
                "VALUES (?, ?, 'ACTIVE', ?, ?, ?)",
                (exp.id, op.request_id, json.dumps(op.hparams), op.seed, json.dumps(sequencer.to_dict())),
            )
        # The experiment's newest rows are these (this scheduler is its only writer, in this transaction).
        ids = {
            row["request_id"]: row["id"]
            for row in self.db.query(
                "SELECT id, request_id FROM trials WHERE experiment_id = ? ORDER BY id DESC LIMIT ?",
                (exp.id, len(batch)),
            )
        }
        created = []
        for (op, _), sequencer in zip(batch, sequencers, strict=True):
            trial = TrialRuntime(ids[op.request_id], exp.id, op.request_id, op.hparams, op.seed, sequencer)
            self.trials[trial.id] = trial
            exp.trial_ids.append(trial.id)
            exp.live[op.request_id] = trial
            if op.checkpoint_from:
                self._start_from_parent(exp, trial, op.checkpoint_from)
            created.append(trial)
        self.wake.set()
        return created

    def _start_from_parent(self, exp: ExperimentRuntime, child: TrialRuntime, parent_request: str) -> None:
        """The child resumes from the parent's state: now if it is saved, else after the parent saves it."""
        parent_row = self.db.query_one(
            "SELECT id FROM trials WHERE experiment_id = ? AND request_id = ?", (exp.id, parent_request)
        )
        if parent_row is not None:
            self.db.defer("UPDATE trials SET parent_trial_id = ? WHERE id = ?", (parent_row["id"], child.id))
        parent = exp.live.get(parent_request)
        if parent is not None and parent.sequencer.checkpoint_due_before_stop():
            parent.sequencer.request_checkpoint()
            self._wait_for(child, parent.id)
            self._save_trial(child)
            self._save_trial(parent)
            self._dispatch(parent)
            return
        row = self.db.query_one(
            "SELECT t.id, t.latest_checkpoint_uuid, t.latest_checkpoint_batches, t.latest_checkpoint_step, "
            "c.state "
            "FROM trials t LEFT JOIN checkpoints c ON c.uuid = t.latest_checkpoint_uuid "
            "WHERE t.experiment_id = ? AND t.request_id = ?",
            (exp.id, parent_request),
        )
        if row is None or not row["latest_checkpoint_uuid"] or row["state"] != "COMPLETED":
            self._log_line(
                child,
                f"trial {child.id} starts from scratch: the trial it continues has no stored checkpoint",
            )
            return
        self._copy_checkpoint(
            child,
            row["id"],
            row["latest_checkpoint_uuid"],
            row["latest_checkpoint_batches"],
            row["latest_checkpoint_step"],
        )

    def _resume_wait_for_parent(self, child: TrialRuntime, parent_id: int) -> None:
        """A child whose parent can no longer save the state it waits for (the parent ended, or its
        request was lost) copies the parent's newest stored checkpoint, or starts from scratch."""
        parent = self.trials.get(parent_id)
        if parent is not None and parent.sequencer.checkpoint_requested:
            self._wait_for(child, parent_id)
            return
        row = self.db.query_one(
            "SELECT latest_checkpoint_uuid, latest_checkpoint_batches, latest_checkpoint_step FROM trials "
            "WHERE id = ?",
            (parent_id,),
        )
        if row and row["latest_checkpoint_uuid"]:
            self._copy_checkpoint(
                child,
                parent_id,
                row["latest_checkpoint_uuid"],
                row["latest_checkpoint_batches"],
                row["latest_checkpoint_step"],
            )
            return
        self._wait_for(child, None)
        self._save_trial(child)
        self._log_line(
            child,
            f"trial {child.id} starts from scratch: trial {parent_id} ended without saving a checkpoint",
        )
        self.wake.set()

    def _wait_for(self, child: TrialRuntime, parent_id: int | None) -> None:
        """Sets (or clears) the trial whose checkpoint the child waits for, keeping the index."""
        if child.waiting_on is not None:
            waiting = self._children.get(child.waiting_on, set())
            waiting.discard(child.id)
            if not waiting:
                self._children.pop(child.waiting_on, None)
        child.waiting_on = parent_id
        if parent_id is not None:
            self._children.setdefault(parent_id, set()).add(child.id)

    def _waiting_children(self, parent_id: int) -> list[TrialRuntime]:
        return [self.trials[c] for c in sorted(self._children.get(parent_id, ())) if c in self.trials]

    def _holds_checkpoint(self, trial: TrialRuntime) -> None:
        exp = self.experiments.get(trial.experiment_id)
        if exp is not None and trial.latest_checkpoint_uuid:
            exp.checkpointed[trial.id] = trial

    def _copy_checkpoint(
        self, child: TrialRuntime, parent_id: int, uuid: str, batches: int, step: int
    ) -> None:
        child.latest_checkpoint_uuid = uuid
        child.latest_checkpoint_batches = batches
        child.latest_checkpoint_step = step
        child.sequencer.restart_from(batches, step)
        self._wait_for(child, None)
        self._holds_checkpoint(child)
        self._save_trial(child)
        self._log_line(
            child, f"trial {child.id} continues from trial {parent_id}'s checkpoint {uuid} (batch {batches})"
        )
        self.wake.set()

    def _by_request(self, exp: ExperimentRuntime, request_id: str) -> TrialRuntime:
        trial = exp.live.get(request_id)
        if trial is None:
            raise KeyError(f"experiment {exp.id} has no live trial for searcher request {request_id}")
        return trial

    # ---- persistence helpers ---------------------------------------------------------------

    def _save_trial(self, trial: TrialRuntime) -> None:
        """Marks the trial's row for writing from memory when the transaction flushes (once, however
        many events of a batch changed it); outside a transaction it is written now."""
        trial.has_work = None
        self._dirty_trials[trial.id] = trial
        if not self.db.in_transaction:
            self.db.flush()

    def _write_dirty(self) -> None:
        """The flush hook: writes the trial rows and searcher snapshots changed in memory."""
        if self._dirty_trials:
            trials, self._dirty_trials = self._dirty_trials, {}
            for trial in trials.values():
                self.db.defer(
                    SAVE_TRIAL,
                    (
                        trial.sequencer.batches_trained,
                        trial.latest_checkpoint_uuid,
                        trial.latest_checkpoint_batches,
                        trial.latest_checkpoint_step,
                        json.dumps(trial.sequencer.to_dict()),
                        trial.best_validation,
                        trial.waiting_on,
                        trial.id,
                    ),
                )
        if self._dirty_searchers:
            searchers, self._dirty_searchers = self._dirty_searchers, {}
            for exp in searchers.values():
                self._write_journal(exp)

    def _write_journal(self, exp: ExperimentRuntime) -> None:
        """The searcher's new events, or a snapshot covering them (`SearcherJournal`)."""
        flush = exp.journal.flush()
        if flush is None:
            return
        if flush.snapshot is not None:
            self.db.defer(SAVE_SNAPSHOT, (flush.snapshot, flush.seq, exp.id))
            if flush.drop_events:
                self.db.defer(
                    "DELETE FROM searcher_events WHERE experiment_id = ? AND seq <= ?", (exp.id, flush.seq)
                )
        for seq, event in flush.events:
            self.db.defer(
                "INSERT INTO searcher_events (experiment_id, seq, event_json) VALUES (?, ?, ?)",
                (exp.id, seq, event),
            )

    def _end_trial(self, trial: TrialRuntime, state: str, error: str) -> None:
        trial.state = state
        self._save_trial(trial)
        self.db.defer(
            "UPDATE trials SET state = ?, error = ?, end_time = ? WHERE id = ?",
            (state, error, utc_now(), trial.id),
        )
        self.trials.pop(trial.id, None)
        self._running.pop(trial.id, None)
        self._wait_for(trial, None)
        exp = self.experiments.get(trial.experiment_id)
        if exp is not None and exp.live.get(trial.request_id) is trial:
            del exp.live[trial.request_id]
        if exp is not None:
            exp.checkpointed.pop(trial.id, None)
        for child in self._waiting_children(trial.id):
            self._resume_wait_for_parent(child, trial.id)
        if exp is not None:
            self._collect_garbage(exp)

    def _collect_garbage(self, exp: ExperimentRuntime) -> None:
        """Applies the experiment's save_* policy to its stored checkpoints."""
        if exp.gc is None:
            exp.gc = self._load_ledger(exp)
        # Live trials without a checkpoint have nothing to keep.
        doomed = exp.gc.collect(
            live_trial_ids=set(exp.checkpointed),
            protected={t.latest_checkpoint_uuid for t in exp.checkpointed.values()},
        )
        if doomed:
            self.deleter.delete(doomed)

    def _load_ledger(self, exp: ExperimentRuntime) -> CheckpointLedger:
        """The experiment's checkpoints and metrics as stored (once per experiment and scheduler)."""
        ledger = CheckpointLedger(
            GCPolicy.from_storage(exp.config.checkpoint_storage, exp.config.smaller_is_better)
        )
        metric = exp.config.searcher_metric
        for v in self.db.query(
            "SELECT v.trial_id, v.total_batches, v.metrics_json FROM validations v JOIN trials t "
            "ON t.id = v.trial_id WHERE t.experiment_id = ?",
            (exp.id,),
        ):
            ledger.add_metric(v["trial_id"], v["total_batches"], json.loads(v["metrics_json"]).get(metric))
        for r in self.db.query(
            "SELECT c.uuid, c.trial_id, c.total_batches FROM checkpoints c "
            "JOIN trials t ON t.id = c.trial_id WHERE t.experiment_id = ? AND c.state = 'COMPLETED'",
            (exp.id,),
        ):
            ledger.add_checkpoint(CheckpointRef(r["uuid"], r["trial_id"], r["total_batches"]))
        return ledger

    def _mark_deleted(self, uuid: str) -> None:
        for exp in self.experiments.values():
            if exp.gc is not None and exp.gc.deleted(uuid):
                break
        self.db.execute("UPDATE checkpoints SET state = 'DELETED' WHERE uuid = ?", (uuid,))

    def _maybe_finish(self, exp: ExperimentRuntime) -> None:
        if exp.live or exp.id not in self.experiments:
            return
        if exp.state != "CANCELED" and not exp.searcher_done:
            return
        states = [
            r["state"] for r in self.db.query("SELECT state FROM trials WHERE experiment_id = ?", (exp.id,))
        ]
        error = ""
        if exp.state == "CANCELED":
            state = "CANCELED"
        elif exp.searcher_failed or (states and all(s == "ERROR" for s in states)):
            state = "ERROR"
            error = (
                "every trial failed" if states and all(s == "ERROR" for s in states) else "the search failed"
            )
        else:
            state = "COMPLETED"
        self._collect_garbage(exp)
        self.db.execute(
            "UPDATE experiments SET state = ?, error = ?, ended_at = ? WHERE id = ?",
            (state, error, utc_now(), exp.id),
        )
        del self.experiments[exp.id]
        log.info("experiment ended", experiment_id=exp.id, state=state)

    def _log_line(self, trial: TrialRuntime, message: str, source: str = "pedl") -> None:
        self.db.defer(INSERT_LOG, (trial.id, trial.run_id, utc_now(), source, message))

    def _notify(self) -> None:
        """Wakes the API's followers (log streams) once per loop turn, however many events it held."""
        if not self._notifying:
            self._notifying = True
            asyncio.get_event_loop().create_task(self._notify_all())

    async def _notify_all(self) -> None:
        self._notifying = False
        async with self.changed:
            self.changed.notify_all()

    def trial_agent(self, trial_id: int) -> str:
        trial = self.trials.get(trial_id)
        return trial.agent_id or "" if trial else ""


def metrics_plain(struct: struct_pb2.Struct) -> dict[str, Any]:
    """A metrics Struct as plain Python, like `pedl._metrics.from_struct` but faster and keeping NaN
    and infinities (a NaN loss is stored as reported; a searcher metric is then refused by name)."""
    out = {}
    for key, value in struct.fields.items():
        out[key] = value.number_value if value.WhichOneof("kind") == "number_value" else _plain(value)
    return out


def metrics_json(struct: struct_pb2.Struct) -> str:
    return json.dumps(metrics_plain(struct))


def _plain(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        return value.number_value
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return {key: _plain(v) for key, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [_plain(v) for v in value.list_value.values]
    return None


def _scheduling_agent(
    agent: AgentHandle, free_slots: tuple[str, ...], handoff_slots: tuple[str, ...] = ()
) -> scheduling.Agent:
    """What the pure scheduling policy sees of a connected agent."""
    return scheduling.Agent(
        agent.id,
        tuple(s.id for s in agent.slots),
        free_slots,
        agent.resource_pool,
        frozenset(agent.environments),
        handoff_slots,
    )


def _not_handed_off(agent: AgentHandle | None, slots: tuple[str, ...]) -> tuple[str, ...]:
    if agent is None or not agent.next:
        return slots
    return tuple(s for s in slots if s not in agent.next)
