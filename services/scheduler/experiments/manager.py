"""The experiment manager: the scheduler's core, as one object the API, the agent link and the
scheduling loop talk to, built from rooms that each own one responsibility.

All state changes happen on the scheduler's event loop. Every event that moves a searcher writes
its journal in the same transaction as the rows the event produced, so a restarted scheduler
resumes the search exactly. Agent messages that arrive together are handled in ONE transaction
(group commit), and every message to agents is sent only after the transaction that decided it
committed (`UnitOfWork`). A result the scheduler has not committed was therefore never acted on:
after a crash its workload is sent again (workloads carry absolute batch counts) or the trial
resumes from its last committed checkpoint.

Why rooms and a dispatcher, not mixins: each room is an object holding the shared `SchedulerState`,
the one `UnitOfWork` and the dispatcher's `perform`, and never another room: what it needs of the
others it emits as typed values (`machine.Effect`, `effects.Step`) that `dispatcher.Dispatcher`
carries out, so reading one room tells what it decides and what state it touches, and reading the
dispatcher tells who carries out each decision. A class assembled from mixins would put every
method back into one namespace, where any method may call any other through `self`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pedl.config import ExperimentConfig
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler import scheduling
from pedl_scheduler.checkpoint_deleter import CheckpointDeleter
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.experiments.dispatcher import Dispatcher
from pedl_scheduler.experiments.restart_policy import RestartBackoff
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.request_limits import RequestLimits
from pedl_scheduler.storage import Storage
from pedl_server_auth import ANONYMOUS, Principal


class ExperimentManager:
    def __init__(
        self,
        db: Storage,
        cluster: Cluster,
        checkpoint_store_address: str,
        model_definition_limit: int = 96 * 1024 * 1024,
        reconnect_grace: float = 30.0,
        restart_backoff: RestartBackoff | None = None,
        request_limits: RequestLimits | None = None,
    ) -> None:
        self.state = state = SchedulerState(
            db,
            cluster,
            checkpoint_store_address,
            model_definition_limit,
            reconnect_grace,
            restart_backoff,
            request_limits,
        )
        self.work = work = UnitOfWork(state)
        self.rooms = rooms = Dispatcher(state, work)
        # The rooms the API, the scheduling loop and the checkpoint reconciler call directly.
        self.lifecycle = rooms.lifecycle
        self.scheduling = rooms.scheduling
        self.runs = rooms.runs
        self.adoption = rooms.adoption
        self.intake = rooms.intake
        self.checkpoints = rooms.checkpoints
        # What the API, the agent link, the scheduling loop and the metrics read.
        self.db = db
        self.cluster = cluster
        self.checkpoint_store_address = checkpoint_store_address
        self.experiments = state.experiments
        self.trials = state.trials
        self.wake = state.wake
        self.changed = state.changed
        self.policy: scheduling.SchedulingPolicy = self.scheduling.policy
        self.deleter: CheckpointDeleter = self.checkpoints.deleter

    @property
    def model_definition_limit(self) -> int:
        return self.state.model_definition_limit

    @property
    def request_limits(self) -> RequestLimits:
        return self.state.request_limits

    @property
    def reconnect_grace(self) -> float:
        return self.state.reconnect_grace

    @property
    def cluster_secret(self) -> str | None:
        """Signs each run's checkpoint-store credential (pedl_server_auth.trial_token); None without auth."""
        return self.state.cluster_secret

    @cluster_secret.setter
    def cluster_secret(self, secret: str | None) -> None:
        self.state.cluster_secret = secret

    # ---- start-up ---------------------------------------------------------------------------

    def recover(self) -> None:
        self.rooms.recover()

    # ---- user requests ----------------------------------------------------------------------

    def create_experiment(
        self,
        config_yaml: str | ExperimentConfig,
        model_definition: bytes,
        name: str,
        owner: str = "",
        requester: Principal = ANONYMOUS,
    ) -> int:
        return self.lifecycle.create_experiment(config_yaml, model_definition, name, owner, requester)

    def kill_experiment(self, exp_id: int) -> None:
        self.lifecycle.kill_experiment(exp_id)

    def pause_experiment(self, exp_id: int) -> None:
        self.lifecycle.pause_experiment(exp_id)

    def kill_trial(self, trial_id: int) -> None:
        self.lifecycle.kill_trial(trial_id)

    def reconfigure(
        self, exp_id: int, config: ExperimentConfig, collect: bool = False, dry_run: bool = False
    ) -> list[str]:
        """`det e set max-slots|weight|priority|gc-policy`: the experiment runs on under `config` (already
        stored); with `collect`, its checkpoints are collected under the new save_* policy (the uuids)."""
        return self.rooms.reconfigure(exp_id, config, collect, dry_run)

    def activate_experiment(self, exp_id: int) -> None:
        self.rooms.activate_experiment(exp_id)

    def checkpoint_rows(self, uuids: list[str]) -> list[dict]:
        """The checkpoints' rows with their experiment and owner (NotFound: one is unknown or deleted)."""
        return self.checkpoints.rows(uuids)

    def refuse_deleting_needed(self, rows: list[dict]) -> None:
        """UserError when a live or queued trial, a PBT child, ASHA or a warm start needs one of them."""
        self.checkpoints.refuse_if_needed(rows)

    async def delete_checkpoints(self, uuids: list[str]) -> None:
        await self.checkpoints.delete(uuids)

    def trial_agent(self, trial_id: int) -> str:
        return self.runs.trial_agent(trial_id)

    def trial_waiting_reason(self, trial_id: int) -> str:
        trial = self.trials.get(trial_id)
        return trial.waiting_reason if trial is not None else ""

    # ---- the scheduling loop ----------------------------------------------------------------

    def tick(self, now: float) -> None:
        self.rooms.tick(now)

    def schedule(self) -> None:
        self.scheduling.schedule()

    def _cluster_state(self) -> scheduling.ClusterState:
        """What the scheduling policy would be shown now (the metrics count the queue from it)."""
        return self.scheduling.cluster_state()

    def expire_unconfirmed(self, now: float) -> None:
        self.adoption.expire_unconfirmed(now)

    # ---- agent events -----------------------------------------------------------------------

    def on_agent_registered(self, agent: AgentHandle, running: list[agent_pb2.RunningTrial]) -> None:
        self.adoption.on_agent_registered(agent, running)

    def on_agent_disconnected(self, agent_id: str) -> None:
        self.adoption.on_agent_disconnected(agent_id)

    def on_agent_messages(self, batch: Sequence[tuple[AgentHandle, agent_pb2.ConnectRequest]]) -> None:
        self.rooms.on_agent_messages(batch)

    def on_workload_completed(self, agent: AgentHandle, result: common_pb2.WorkloadResult) -> None:
        self.intake.on_workload_completed(agent, result)

    def on_trial_exited(self, agent: AgentHandle, message: agent_pb2.TrialExited) -> None:
        self.runs.on_trial_exited(agent, message)
