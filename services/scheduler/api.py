"""SchedulerService: the user-facing API, a thin layer over the ExperimentManager and the DB."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc

from pedl import __version__
from pedl._server_auth import current_principal
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from pedl_scheduler import convert
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager, NotFound, UserError
from pedl_scheduler.storage_check import StorageCheckError, check_checkpoint_storage

TERMINAL = ("COMPLETED", "ERROR", "CANCELED")


class SchedulerApi(scheduler_pb2_grpc.SchedulerServiceServicer):
    def __init__(
        self,
        manager: ExperimentManager,
        cluster: Cluster,
        cluster_id: str,
        storage_roots: Sequence[Path] | None = None,
    ) -> None:
        self.manager = manager
        # Where shared_fs checkpoint storage may lie (--allowed-storage-root); None: anywhere.
        self.storage_roots = storage_roots
        self.db = manager.db
        self.cluster = cluster
        self.cluster_id = cluster_id

    async def CreateExperiment(self, request, context):  # noqa: N802
        try:
            await asyncio.to_thread(check_checkpoint_storage, request.config_yaml, self.storage_roots)
        except StorageCheckError as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        try:
            principal = current_principal()
            exp_id = self.manager.create_experiment(
                request.config_yaml,
                request.model_definition,
                request.model_definition_name,
                owner=principal.username if principal.kind == "user" else "",
            )
        except UserError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return scheduler_pb2.CreateExperimentResponse(experiment=self._experiment(exp_id))

    async def ListExperiments(self, request, context):  # noqa: N802
        rows = self.db.query(
            "SELECT e.*, (SELECT COUNT(*) FROM trials t WHERE t.experiment_id = e.id) AS num_trials "
            "FROM experiments e ORDER BY e.id"
        )
        return scheduler_pb2.ListExperimentsResponse(
            experiments=[convert.experiment(r, r["num_trials"]) for r in rows]
        )

    async def GetExperiment(self, request, context):  # noqa: N802
        exp = await self._experiment_or_abort(request.experiment_id, context)
        rows = self.db.query(
            "SELECT t.*, (SELECT COUNT(*) FROM steps s WHERE s.trial_id = t.id) AS num_steps "
            "FROM trials t WHERE t.experiment_id = ? ORDER BY t.id",
            (request.experiment_id,),
        )
        trials = [convert.trial(r, self.manager.trial_agent(r["id"]), r["num_steps"]) for r in rows]
        return scheduler_pb2.GetExperimentResponse(experiment=exp, trials=trials)

    async def KillExperiment(self, request, context):  # noqa: N802
        await self._lifecycle(self.manager.kill_experiment, request.experiment_id, context)
        return scheduler_pb2.KillExperimentResponse(experiment=self._experiment(request.experiment_id))

    async def PauseExperiment(self, request, context):  # noqa: N802
        await self._lifecycle(self.manager.pause_experiment, request.experiment_id, context)
        return scheduler_pb2.PauseExperimentResponse(experiment=self._experiment(request.experiment_id))

    async def ActivateExperiment(self, request, context):  # noqa: N802
        await self._lifecycle(self.manager.activate_experiment, request.experiment_id, context)
        return scheduler_pb2.ActivateExperimentResponse(experiment=self._experiment(request.experiment_id))

    async def _lifecycle(self, action, exp_id: int, context) -> None:
        row = self.db.query_one("SELECT owner FROM experiments WHERE id = ?", (exp_id,))
        if row is not None and not current_principal().may_manage(row["owner"]):
            owner = f"user {row['owner']!r}" if row["owner"] else "no user"
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"experiment {exp_id} belongs to {owner}: only its owner or an admin may change it",
            )
        try:
            action(exp_id)
        except NotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except UserError as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))

    async def GetModelDefinition(self, request, context):  # noqa: N802
        row = self.db.query_one(
            "SELECT model_definition, model_definition_name FROM experiments WHERE id = ?",
            (request.experiment_id,),
        )
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {request.experiment_id} not found")
        return scheduler_pb2.GetModelDefinitionResponse(
            model_definition=bytes(row["model_definition"]),
            model_definition_name=row["model_definition_name"],
        )

    async def GetTrial(self, request, context):  # noqa: N802
        row = self.db.query_one("SELECT * FROM trials WHERE id = ?", (request.trial_id,))
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"trial {request.trial_id} not found")
        steps = self.db.query("SELECT * FROM steps WHERE trial_id = ? ORDER BY total_batches", (row["id"],))
        vals = self.db.query(
            "SELECT * FROM validations WHERE trial_id = ? ORDER BY total_batches", (row["id"],)
        )
        ckpts = self.db.query(
            "SELECT * FROM checkpoints WHERE trial_id = ? ORDER BY total_batches", (row["id"],)
        )
        return scheduler_pb2.GetTrialResponse(
            trial=convert.trial(row, self.manager.trial_agent(row["id"]), len(steps)),
            steps=[convert.step(s) for s in steps],
            validations=[convert.validation(v) for v in vals],
            checkpoints=[convert.checkpoint(c) for c in ckpts],
        )

    async def GetTrialLogs(self, request, context) -> AsyncIterator[scheduler_pb2.GetTrialLogsResponse]:  # noqa: N802
        if self.db.query_one("SELECT id FROM trials WHERE id = ?", (request.trial_id,)) is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"trial {request.trial_id} not found")
        after = request.after_id
        while True:
            rows = self.db.query(
                "SELECT * FROM trial_logs WHERE trial_id = ? AND id > ? ORDER BY id LIMIT 1000",
                (request.trial_id, after),
            )
            if rows:
                after = rows[-1]["id"]
                yield scheduler_pb2.GetTrialLogsResponse(lines=[convert.log_line(r) for r in rows])
                continue
            if not request.follow:
                return
            state = self.db.query_one("SELECT state FROM trials WHERE id = ?", (request.trial_id,))["state"]
            if state in TERMINAL:
                return
            async with self.manager.changed:
                try:
                    await asyncio.wait_for(self.manager.changed.wait(), timeout=1.0)
                except asyncio.TimeoutError:
                    pass

    async def ListAgents(self, request, context):  # noqa: N802
        return scheduler_pb2.ListAgentsResponse(agents=[a.to_proto() for a in self.cluster.agents.values()])

    async def GetClusterInfo(self, request, context):  # noqa: N802
        return scheduler_pb2.GetClusterInfoResponse(
            version=__version__,
            checkpoint_store_address=self.manager.checkpoint_store_address,
            cluster_id=self.cluster_id,
        )

    def _experiment(self, exp_id: int) -> scheduler_pb2.Experiment:
        row = self.db.query_one("SELECT * FROM experiments WHERE id = ?", (exp_id,))
        assert row is not None
        count = self.db.query_one("SELECT COUNT(*) AS n FROM trials WHERE experiment_id = ?", (exp_id,))["n"]
        return convert.experiment(row, count)

    async def _experiment_or_abort(self, exp_id: int, context) -> scheduler_pb2.Experiment:
        if self.db.query_one("SELECT id FROM experiments WHERE id = ?", (exp_id,)) is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {exp_id} not found")
        return self._experiment(exp_id)
