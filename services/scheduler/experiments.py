"""The experiment and trial lifecycle: searcher operations in, workloads and DB rows out.

All state changes happen on the scheduler's event loop. Every event that moves a
searcher writes its snapshot in the same transaction as the rows the event produced, so
a restarted scheduler resumes the search exactly.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from typing import Any

import structlog
from google.protobuf import json_format

from pedl import _trial_token
from pedl._metrics import from_struct, to_struct
from pedl._timeutil import utc_now
from pedl.config import ConfigError, parse_experiment_config
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
from pedl_scheduler import scheduling
from pedl_scheduler.checkpoint_deleter import CheckpointDeleter
from pedl_scheduler.checkpoint_gc import CheckpointRef, GCPolicy, checkpoints_to_delete
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.db import Database
from pedl_scheduler.runtime import ExperimentRuntime, TrialRuntime
from pedl_scheduler.scheduling.placement import PoolSlots

log = structlog.get_logger(component="experiments")

WORKLOAD_KINDS = {kind: common_pb2.WorkloadKind.Value(f"WORKLOAD_KIND_{kind.value}") for kind in Kind}
KIND_NAMES = {value: kind for kind, value in WORKLOAD_KINDS.items()}


# Rendezvous ports of gangs over several agents: this base plus the trial id modulo 1000.
RENDEZVOUS_BASE_PORT = 29500


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
        self.wake = asyncio.Event()
        self.changed = asyncio.Condition()

    # ---- start-up -------------------------------------------------------------------------

    def recover(self) -> None:
        """Rebuilds active experiments from the database; their live trials are queued again."""
        for row in self.db.query("SELECT * FROM experiments WHERE state IN ('ACTIVE', 'PAUSED')"):
            config = parse_experiment_config(json.loads(row["config_json"]))
            searcher = restore_search_method(config, row["seed"], json.loads(row["searcher_snapshot"]))
            exp = ExperimentRuntime(row["id"], config, searcher, state=row["state"])
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
                    waiting_on=t["waiting_on_trial_id"],
                )
                self.trials[trial.id] = trial
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
        with self.db.transaction():
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
            exp = ExperimentRuntime(exp_id, config, searcher)
            self.experiments[exp_id] = exp
            self._apply(exp, searcher.initial_operations())
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
        with self.db.transaction():
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
        if waiting:
            self._yield_idle_slots()
        for trial_id, allocations in decision.assignments.items():
            gang = [(self.cluster.agents[a.agent_id], a.slot_ids) for a in allocations]
            self._start(self.trials[trial_id], gang)

    def _cluster_state(self) -> scheduling.ClusterState:
        running, queued = [], []
        for t in self.trials.values():
            exp = self.experiments[t.experiment_id]
            if t.running:
                running.append(
                    scheduling.RunningTrial(
                        t.id,
                        t.experiment_id,
                        (
                            scheduling.Allocation(t.agent_id or "", t.slot_ids),
                            *(scheduling.Allocation(a, slots) for a, slots in t.peers),
                        ),
                        preempting=t.sequencer.stop_requested,
                        order=t.started_order,
                    )
                )
            elif (
                t.state == "ACTIVE"
                and not t.killing
                and t.unconfirmed_until is None
                and t.waiting_on is None
                and exp.state == "ACTIVE"
                and self._has_work(t)
            ):
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
        agents = [_scheduling_agent(a, a.free_slots()) for a in self.cluster.agents.values()]
        return scheduling.ClusterState(agents, running, queued, experiments)

    def _yield_idle_slots(self) -> None:
        """Trials idle until the searcher hears from others (a PBT round) give their slots to queued ones.

        Without this, a population larger than the cluster would wait forever on itself.
        """
        for trial in list(self.trials.values()):
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
        """Whether a (re)started run of the trial would have a workload to do now."""
        probe = TrialSequencer.from_dict(trial.sequencer.to_dict())
        probe.restart_from(trial.latest_checkpoint_batches, trial.latest_checkpoint_step)
        return probe.next_workload() is not None

    def _request_stop(self, trial: TrialRuntime) -> None:
        """Checkpoint at the next step boundary, then exit; the trial resumes later (pause, preemption)."""
        trial.sequencer.request_stop()
        self._save_trial(trial)
        self._dispatch(trial)

    def pause_experiment(self, exp_id: int) -> None:
        exp = self._live_experiment(exp_id)
        if exp.state != "ACTIVE":
            return
        exp.state = "PAUSED"
        with self.db.transaction():
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
        with self.db.transaction():
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
        self.db.execute("UPDATE trials SET state = ? WHERE id = ?", (state, trial.id))

    def _start(self, trial: TrialRuntime, gang: list[tuple[AgentHandle, tuple[str, ...]]]) -> None:
        """Starts a run on one agent, or as a gang over several (the first holds the chief, rank 0)."""
        exp = self.experiments[trial.experiment_id]
        (agent, slot_ids), others = gang[0], gang[1:]
        trial.run_id += 1
        self._starts += 1
        trial.started_order = self._starts
        trial.agent_id = agent.id
        trial.slot_ids = slot_ids
        trial.peers = tuple((a.id, slots) for a, slots in others)
        trial.in_flight = False
        trial.sequencer.restart_from(trial.latest_checkpoint_batches, trial.latest_checkpoint_step)
        for member, slots in gang:
            for slot_id in slots:
                member.used[slot_id] = trial.id
        self.db.execute(
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
        rank = 0
        for member, slots in gang:
            member.send(
                agent_pb2.ConnectResponse(
                    start_trial=agent_pb2.StartTrial(
                        trial_id=trial.id,
                        run_id=trial.run_id,
                        experiment_id=exp.id,
                        config_yaml=json.dumps(exp.config.raw),
                        hparams=to_struct(trial.hparams),
                        latest_checkpoint_uuid=trial.latest_checkpoint_uuid,
                        latest_checkpoint_batches=trial.latest_checkpoint_batches,
                        slot_ids=list(slots),
                        trial_seed=trial.seed,
                        checkpoint_store_address=self.checkpoint_store_address,
                        model_definition_name=self._model_definition_name(exp.id),
                        rank=rank,
                        world_size=world_size,
                        rendezvous_address=rendezvous,
                        environment="" if env == "default" else env,
                        checkpoint_token=self._checkpoint_token(exp.id, trial.id),
                    )
                )
            )
            rank += len(slots)
        placement = "; ".join(f"agent {m.id} (slots {', '.join(slots)})" for m, slots in gang)
        self._log_line(trial, f"trial {trial.id} run {trial.run_id} started on {placement}")
        log.info("trial started", trial_id=trial.id, run_id=trial.run_id, agent_id=agent.id, gang=len(gang))
        self._dispatch(trial)

    def _checkpoint_token(self, exp_id: int, trial_id: int) -> str:
        return _trial_token.mint(self.cluster_secret, exp_id, trial_id) if self.cluster_secret else ""

    def _model_definition_name(self, exp_id: int) -> str:
        row = self.db.query_one("SELECT model_definition_name FROM experiments WHERE id = ?", (exp_id,))
        return row["model_definition_name"] if row else ""

    def _dispatch(self, trial: TrialRuntime) -> None:
        """Sends the trial's next workload if it is running and idle."""
        if not trial.running or trial.in_flight or trial.killing:
            return
        nxt = trial.sequencer.next_workload()
        if nxt is None:
            return
        agent = self.cluster.agents.get(trial.agent_id or "")
        if agent is None:
            return
        if nxt.kind is Kind.TERMINATE:
            trial.sequencer.on_terminate_sent()
            self._save_trial(trial)
        trial.in_flight = nxt.kind is not Kind.TERMINATE
        agent.send(
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
            )
        )

    # ---- agent events ---------------------------------------------------------------------

    def on_agent_registered(self, agent: AgentHandle, running: list[agent_pb2.RunningTrial]) -> None:
        """Adopts the runs the agent still has that are current here, and stops the rest.

        Trials this scheduler placed on the agent that it no longer reports get a short
        deadline: their exit may still be in the agent's backlog, which follows the register.
        """
        reported = set()
        for r in running:
            trial = self.trials.get(r.trial_id)
            adoptable = (
                trial is not None
                and trial.run_id == r.run_id
                and not trial.killing
                and trial.agent_id in (None, agent.id)
                and (trial.running or trial.unconfirmed_until is not None)
            )
            if not adoptable:
                agent.send(
                    agent_pb2.ConnectResponse(
                        kill_trial=agent_pb2.KillTrial(trial_id=r.trial_id, run_id=r.run_id)
                    )
                )
                continue
            assert trial is not None
            reported.add(trial.id)
            trial.agent_id, trial.slot_ids = agent.id, tuple(r.slot_ids)
            trial.unconfirmed_until = None
            trial.in_flight = r.busy
            for slot_id in r.slot_ids:
                agent.used[slot_id] = trial.id
            self._log_line(trial, f"trial {trial.id} run {trial.run_id} continues on agent {agent.id}")
            log.info("trial run adopted", trial_id=trial.id, run_id=trial.run_id, agent_id=agent.id)
            self._dispatch(trial)
        deadline = time.monotonic() + min(self.reconnect_grace, 5.0)
        for trial in self.trials.values():
            if trial.agent_id == agent.id and trial.id not in reported:
                trial.unconfirmed_until = deadline
        self.wake.set()

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

    def on_workload_completed(self, agent: AgentHandle, result: common_pb2.WorkloadResult) -> None:
        w = result.workload
        trial = self._current(agent, w.trial_id, w.run_id)
        if trial is None:
            return
        trial.in_flight = False
        kind = KIND_NAMES.get(w.kind)
        metrics = from_struct(result.metrics)
        now = utc_now()
        try:
            with self.db.transaction():
                if kind is Kind.RUN_STEP:
                    self._record_step(trial, w, result, metrics, now)
                elif kind is Kind.COMPUTE_VALIDATION_METRICS:
                    self._record_validation(trial, w, metrics, now)
                elif kind is Kind.CHECKPOINT_MODEL:
                    self._record_checkpoint(trial, w, result.checkpoint, now)
                self._save_trial(trial)
        except UserError as e:
            self._fail_running_trial(trial, str(e))
            return
        self._dispatch(trial)
        self._notify()

    def _record_step(
        self,
        trial: TrialRuntime,
        w: common_pb2.Workload,
        result: common_pb2.WorkloadResult,
        metrics: dict[str, Any],
        now: str,
    ) -> None:
        self.db.execute(
            "INSERT INTO steps (trial_id, step_id, total_batches, num_batches, metrics_json, end_time) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (trial.id, w.step_id, w.total_batches, result.num_batches, json.dumps(metrics), now),
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
        self.db.execute(
            "INSERT INTO validations (trial_id, step_id, total_batches, metrics_json, end_time) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (trial.id, w.step_id, w.total_batches, json.dumps(metrics), now),
        )
        prometheus.validation_ingested()
        if is_better(value, trial.best_validation, exp.config.smaller_is_better):
            trial.best_validation = value
        if trial.sequencer.on_validation_completed(w.total_batches):
            self._apply(
                exp, exp.searcher.on_validation_completed(trial.request_id, float(value), w.total_batches)
            )

    def _record_checkpoint(
        self, trial: TrialRuntime, w: common_pb2.Workload, ckpt: common_pb2.Checkpoint, now: str
    ) -> None:
        self.db.execute(
            "INSERT INTO checkpoints (uuid, trial_id, step_id, total_batches, state, checkpoint_json, "
            "created_at) VALUES (?, ?, ?, ?, 'COMPLETED', ?, ?) ON CONFLICT DO NOTHING",
            (ckpt.uuid, trial.id, w.step_id, w.total_batches, json_format.MessageToJson(ckpt), now),
        )
        trial.latest_checkpoint_uuid = ckpt.uuid
        trial.latest_checkpoint_batches = w.total_batches
        trial.latest_checkpoint_step = w.step_id
        copyable = trial.sequencer.requested_checkpoint_reached(w.total_batches)
        trial.sequencer.on_checkpoint_completed(w.total_batches)
        prometheus.checkpoint_recorded()
        if copyable:
            for child in [t for t in self.trials.values() if t.waiting_on == trial.id]:
                self._copy_checkpoint(child, trial.id, ckpt.uuid, w.total_batches, w.step_id)

    def on_trial_logs(self, agent: AgentHandle, message: agent_pb2.TrialLogs) -> None:
        if message.trial_id not in self.trials and not self.db.query_one(
            "SELECT id FROM trials WHERE id = ?", (message.trial_id,)
        ):
            return
        with self.db.transaction():
            for line in message.lines:
                self.db.execute(
                    "INSERT INTO trial_logs (trial_id, run_id, timestamp, source, message) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (
                        message.trial_id,
                        message.run_id,
                        line.timestamp or utc_now(),
                        line.source or "stdout",
                        line.message,
                    ),
                )
        self._notify()

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
        trial.agent_id, trial.slot_ids, trial.in_flight, trial.peers = None, (), False, ()
        trial.unconfirmed_until = None
        with self.db.transaction():
            if trial.killing:
                self._end_trial(trial, "CANCELED", "")
            elif exit_code == 0 and trial.sequencer.terminated and not trial.sequencer.closing:
                self._log_line(
                    trial,
                    f"trial {trial.id} stopped at batch {trial.sequencer.batches_trained}; "
                    "it resumes from its checkpoint when scheduled again",
                )
                self._save_trial(trial)
            elif exit_code == 0 and trial.sequencer.terminated:
                self._end_trial(trial, "COMPLETED", "")
                self._apply(exp, exp.searcher.on_trial_closed(trial.request_id))
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
                    self._apply(exp, exp.searcher.on_trial_exited_early(trial.request_id))
            self._maybe_finish(exp)
        self.wake.set()
        self._notify()

    def _restart(self, trial: TrialRuntime, exp: ExperimentRuntime) -> None:
        """Queues the trial again; its next run resumes from its latest complete checkpoint."""
        trial.restarts += 1
        self.db.execute("UPDATE trials SET restarts = ? WHERE id = ?", (trial.restarts, trial.id))
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
        with self.db.transaction():
            self._log_line(trial, f"trial {trial.id} failed: {reason}", source="pedl")
            self._end_trial(trial, "ERROR", reason)
            self._apply(exp, exp.searcher.on_trial_exited_early(trial.request_id))
            self._maybe_finish(exp)
        self.wake.set()
        self._notify()

    def _kill_run(self, trial: TrialRuntime, skip: str | None = None) -> None:
        """Asks every agent of the trial's current run (but `skip`) to kill it."""
        for agent_id in trial.gang_agents():
            agent = self.cluster.agents.get(agent_id)
            if agent is not None and agent_id != skip:
                agent.send(
                    agent_pb2.ConnectResponse(
                        kill_trial=agent_pb2.KillTrial(trial_id=trial.id, run_id=trial.run_id)
                    )
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
                self._create_trial(exp, op)
                pending.extend(exp.searcher.on_trial_created(op.request_id))
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
        self.db.execute(
            "UPDATE experiments SET searcher_snapshot = ? WHERE id = ?",
            (json.dumps(exp.searcher.snapshot()), exp.id),
        )
        self._maybe_finish(exp)

    def _create_trial(self, exp: ExperimentRuntime, op: Create) -> None:
        cfg = exp.config
        sequencer = TrialSequencer(
            batches_per_step=cfg.batches_per_step,
            min_validation_period=cfg.min_validation_period_batches,
            min_checkpoint_period=cfg.min_checkpoint_period_batches,
        )
        trial_id = self.db.execute(
            "INSERT INTO trials (experiment_id, request_id, state, hparams_json, seed, sequencer_json) "
            "VALUES (?, ?, 'ACTIVE', ?, ?, ?)",
            (exp.id, op.request_id, json.dumps(op.hparams), op.seed, json.dumps(sequencer.to_dict())),
        )
        trial = TrialRuntime(trial_id, exp.id, op.request_id, op.hparams, op.seed, sequencer)
        self.trials[trial_id] = trial
        exp.trial_ids.append(trial_id)
        if op.checkpoint_from:
            self._start_from_parent(exp, trial, op.checkpoint_from)
        self.wake.set()

    def _start_from_parent(self, exp: ExperimentRuntime, child: TrialRuntime, parent_request: str) -> None:
        """The child resumes from the parent's state: now if it is saved, else after the parent saves it."""
        parent_row = self.db.query_one(
            "SELECT id FROM trials WHERE experiment_id = ? AND request_id = ?", (exp.id, parent_request)
        )
        if parent_row is not None:
            self.db.execute(
                "UPDATE trials SET parent_trial_id = ? WHERE id = ?", (parent_row["id"], child.id)
            )
        parent = next(
            (
                self.trials[t]
                for t in exp.trial_ids
                if t in self.trials and self.trials[t].request_id == parent_request
            ),
            None,
        )
        if parent is not None and parent.sequencer.checkpoint_due_before_stop():
            parent.sequencer.request_checkpoint()
            child.waiting_on = parent.id
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
            child.waiting_on = parent_id
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
        child.waiting_on = None
        self._save_trial(child)
        self._log_line(
            child,
            f"trial {child.id} starts from scratch: trial {parent_id} ended without saving a checkpoint",
        )
        self.wake.set()

    def _copy_checkpoint(
        self, child: TrialRuntime, parent_id: int, uuid: str, batches: int, step: int
    ) -> None:
        child.latest_checkpoint_uuid = uuid
        child.latest_checkpoint_batches = batches
        child.latest_checkpoint_step = step
        child.sequencer.restart_from(batches, step)
        child.waiting_on = None
        self._save_trial(child)
        self._log_line(
            child, f"trial {child.id} continues from trial {parent_id}'s checkpoint {uuid} (batch {batches})"
        )
        self.wake.set()

    def _by_request(self, exp: ExperimentRuntime, request_id: str) -> TrialRuntime:
        for trial_id in exp.trial_ids:
            trial = self.trials.get(trial_id)
            if trial is not None and trial.request_id == request_id:
                return trial
        raise KeyError(f"experiment {exp.id} has no live trial for searcher request {request_id}")

    # ---- persistence helpers ---------------------------------------------------------------

    def _save_trial(self, trial: TrialRuntime) -> None:
        self.db.execute(
            "UPDATE trials SET total_batches = ?, latest_checkpoint_uuid = ?, latest_checkpoint_batches = ?, "
            "latest_checkpoint_step = ?, sequencer_json = ?, best_validation = ?, waiting_on_trial_id = ? "
            "WHERE id = ?",
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

    def _end_trial(self, trial: TrialRuntime, state: str, error: str) -> None:
        trial.state = state
        self._save_trial(trial)
        self.db.execute(
            "UPDATE trials SET state = ?, error = ?, end_time = ? WHERE id = ?",
            (state, error, utc_now(), trial.id),
        )
        self.trials.pop(trial.id, None)
        for child in [t for t in self.trials.values() if t.waiting_on == trial.id]:
            self._resume_wait_for_parent(child, trial.id)
        exp = self.experiments.get(trial.experiment_id)
        if exp is not None:
            self._collect_garbage(exp)

    def _collect_garbage(self, exp: ExperimentRuntime) -> None:
        """Applies the experiment's save_* policy to its stored checkpoints."""
        rows = self.db.query(
            "SELECT c.uuid, c.trial_id, c.total_batches FROM checkpoints c "
            "JOIN trials t ON t.id = c.trial_id WHERE t.experiment_id = ? AND c.state = 'COMPLETED'",
            (exp.id,),
        )
        if not rows:
            return
        metric = exp.config.searcher_metric
        metrics = {}
        for v in self.db.query(
            "SELECT v.trial_id, v.total_batches, v.metrics_json FROM validations v JOIN trials t "
            "ON t.id = v.trial_id WHERE t.experiment_id = ?",
            (exp.id,),
        ):
            value = json.loads(v["metrics_json"]).get(metric)
            if isinstance(value, (int, float)) and math.isfinite(value):
                metrics[(v["trial_id"], v["total_batches"])] = float(value)
        doomed = checkpoints_to_delete(
            [CheckpointRef(r["uuid"], r["trial_id"], r["total_batches"]) for r in rows],
            metrics,
            GCPolicy.from_storage(exp.config.checkpoint_storage, exp.config.smaller_is_better),
            live_trial_ids={t for t in exp.trial_ids if t in self.trials},
            protected={self.trials[t].latest_checkpoint_uuid for t in exp.trial_ids if t in self.trials},
        )
        if doomed:
            self.deleter.delete(doomed)

    def _mark_deleted(self, uuid: str) -> None:
        self.db.execute("UPDATE checkpoints SET state = 'DELETED' WHERE uuid = ?", (uuid,))

    def _maybe_finish(self, exp: ExperimentRuntime) -> None:
        live = [t for t in exp.trial_ids if t in self.trials]
        if live or exp.id not in self.experiments:
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
        self.db.execute(
            "INSERT INTO trial_logs (trial_id, run_id, timestamp, source, message) VALUES (?, ?, ?, ?, ?)",
            (trial.id, trial.run_id, utc_now(), source, message),
        )

    def _notify(self) -> None:
        asyncio.get_event_loop().create_task(self._notify_all())

    async def _notify_all(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    def trial_agent(self, trial_id: int) -> str:
        trial = self.trials.get(trial_id)
        return trial.agent_id or "" if trial else ""


def _scheduling_agent(agent: AgentHandle, free_slots: tuple[str, ...]) -> scheduling.Agent:
    """What the pure scheduling policy sees of a connected agent."""
    return scheduling.Agent(
        agent.id,
        tuple(s.id for s in agent.slots),
        free_slots,
        agent.resource_pool,
        frozenset(agent.environments),
    )
