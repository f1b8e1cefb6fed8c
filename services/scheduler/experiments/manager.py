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

from pedl.config.image_environments import ImageRule
from pedl_scheduler import scheduling
from pedl_scheduler.checkpoint_deleter import CheckpointDeleter
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments.dispatcher import Dispatcher
from pedl_scheduler.experiments.restart_policy import RestartBackoff
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.unit_of_work import UnitOfWork
from pedl_scheduler.request_limits import RequestLimits
from pedl_scheduler.storage import Storage


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
        image_rules: tuple[ImageRule, ...] = (),
    ) -> None:
        self.state = state = SchedulerState(
            db,
            cluster,
            checkpoint_store_address,
            model_definition_limit,
            reconnect_grace,
            restart_backoff,
            request_limits,
            image_rules,
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
        # The entry points tests, benchmarks and tools call, bound to the room that owns each (no
        # forwarding layer: the product's callers, the servicer, agent link and loops, name the owner).
        self.recover = rooms.recover
        self.create_experiment = rooms.lifecycle.create_experiment
        self.kill_experiment = rooms.lifecycle.kill_experiment
        self.pause_experiment = rooms.lifecycle.pause_experiment
        self.kill_trial = rooms.lifecycle.kill_trial
        self.reconfigure = rooms.reconfigure
        self.activate_experiment = rooms.activate_experiment
        self.tick = rooms.tick
        self.schedule = rooms.scheduling.schedule
        self.expire_unconfirmed = rooms.adoption.expire_unconfirmed
        self.on_agent_registered = rooms.adoption.on_agent_registered
        self.on_agent_disconnected = rooms.adoption.on_agent_disconnected
        self.on_agent_messages = rooms.on_agent_messages
        self.on_workload_completed = rooms.intake.on_workload_completed
        self.on_trial_exited = rooms.runs.on_trial_exited

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

    def trial_waiting_reason(self, trial_id: int) -> str:
        trial = self.trials.get(trial_id)
        return trial.waiting_reason if trial is not None else ""
