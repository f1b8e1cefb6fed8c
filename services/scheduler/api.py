"""SchedulerService: the user-facing API, a thin layer over the ExperimentManager and the DB."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc

from pedl import __version__
from pedl._server_auth import current_principal
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc
from pedl_scheduler import convert, experiment_delete, experiment_patch, trial_results
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager, NotFound, UserError
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import timelines as timeline_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_scheduler.storage_check import StorageCheckError, check_checkpoint_storage

TERMINAL = ("COMPLETED", "ERROR", "CANCELED")
DEFAULT_PAGE, MAX_PAGE = 500, 2000


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
                requester=principal,
            )
        except UserError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return scheduler_pb2.CreateExperimentResponse(experiment=self._experiment(exp_id))

    async def ListExperiments(self, request, context):  # noqa: N802
        rows = experiment_ops.experiments_with_trial_counts(self.db)
        return scheduler_pb2.ListExperimentsResponse(
            experiments=[convert.experiment(r, r["num_trials"]) for r in rows]
        )

    async def GetExperiment(self, request, context):  # noqa: N802
        exp = await self._experiment_or_abort(request.experiment_id, context)
        rows = trial_ops.trials_with_step_counts(self.db, request.experiment_id)
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

    async def PatchExperiment(self, request, context):  # noqa: N802
        exp_id = request.experiment_id
        await self._check_owner(exp_id, context)
        row = experiment_ops.experiment(self.db, exp_id)
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {exp_id} not found")
        try:
            updates = experiment_patch.changes(row, request)
        except experiment_patch.PatchError as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        experiment_ops.patch_experiment(self.db, exp_id, **updates)
        return scheduler_pb2.PatchExperimentResponse(experiment=self._experiment(exp_id))

    async def DeleteExperiment(self, request, context):  # noqa: N802
        exp_id = request.experiment_id
        await self._check_owner(exp_id, context)
        if experiment_ops.experiment_state(self.db, exp_id) is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {exp_id} not found")
        try:
            deleted = await experiment_delete.delete_experiment(
                self.db, self.manager.checkpoint_store_address, exp_id, exp_id in self.manager.experiments
            )
        except experiment_delete.DeleteError as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        return scheduler_pb2.DeleteExperimentResponse(deleted_checkpoints=deleted)

    async def _check_owner(self, exp_id: int, context) -> None:
        stored_owner = experiment_ops.experiment_owner(self.db, exp_id)
        if stored_owner is not None and not current_principal().may_manage(stored_owner):
            owner = f"user {stored_owner!r}" if stored_owner else "no user"
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"experiment {exp_id} belongs to {owner}: only its owner or an admin may change it",
            )

    async def _lifecycle(self, action, exp_id: int, context) -> None:
        await self._check_owner(exp_id, context)
        try:
            action(exp_id)
        except NotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except UserError as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))

    async def GetModelDefinition(self, request, context):  # noqa: N802
        row = experiment_ops.model_definition(self.db, request.experiment_id)
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {request.experiment_id} not found")
        return scheduler_pb2.GetModelDefinitionResponse(
            model_definition=row["model_definition"],
            model_definition_name=row["model_definition_name"],
        )

    async def GetTrial(self, request, context):  # noqa: N802
        row = trial_ops.trial(self.db, request.trial_id)
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"trial {request.trial_id} not found")
        steps = result_ops.steps_of(self.db, row["id"])
        vals = result_ops.validations_of(self.db, row["id"])
        ckpts = result_ops.checkpoints_of(self.db, row["id"])
        return scheduler_pb2.GetTrialResponse(
            trial=convert.trial(row, self.manager.trial_agent(row["id"]), len(steps)),
            steps=[convert.step(s) for s in steps],
            validations=[convert.validation(v) for v in vals],
            checkpoints=[convert.checkpoint(c) for c in ckpts],
            timeline=[common_pb2.TimelinePhase(**p) for p in timeline_ops.of_trial(self.db, row["id"])],
        )

    async def ListTrialDetails(self, request, context):  # noqa: N802
        await self._experiment_or_abort(request.experiment_id, context)
        if request.limit < 0 or request.after_trial_id < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "limit and after_trial_id must be >= 0")
        limit = min(request.limit or DEFAULT_PAGE, MAX_PAGE)
        rows = trial_ops.trials_page(self.db, request.experiment_id, request.after_trial_id, limit)
        ids = [r["id"] for r in rows]
        steps = result_ops.steps_of_trials(self.db, ids) if request.include_steps else []
        by_trial = trial_results.group(
            ids,
            steps=steps,
            validations=result_ops.validations_of_trials(self.db, ids),
            checkpoints=result_ops.checkpoints_of_trials(self.db, ids),
        )
        details = [
            scheduler_pb2.GetTrialResponse(
                trial=convert.trial(r, self.manager.trial_agent(r["id"]), r["num_steps"]),
                steps=[convert.step(x) for x in by_trial[r["id"]]["steps"]],
                validations=[convert.validation(x) for x in by_trial[r["id"]]["validations"]],
                checkpoints=[convert.checkpoint(x) for x in by_trial[r["id"]]["checkpoints"]],
            )
            for r in rows
        ]
        return scheduler_pb2.ListTrialDetailsResponse(
            trials=details, next_after_trial_id=ids[-1] if len(ids) == limit else 0
        )

    async def GetTrialLogs(self, request, context) -> AsyncIterator[scheduler_pb2.GetTrialLogsResponse]:  # noqa: N802
        if not trial_ops.trial_exists(self.db, request.trial_id):
            await context.abort(grpc.StatusCode.NOT_FOUND, f"trial {request.trial_id} not found")
        after = request.after_id
        while True:
            rows = result_ops.logs_after(self.db, request.trial_id, after)
            if rows:
                after = rows[-1]["id"]
                yield scheduler_pb2.GetTrialLogsResponse(lines=[convert.log_line(r) for r in rows])
                continue
            if not request.follow:
                return
            state = trial_ops.trial_state(self.db, request.trial_id)
            if state in TERMINAL:
                return
            async with self.manager.changed:
                try:
                    await asyncio.wait_for(self.manager.changed.wait(), timeout=1.0)
                except asyncio.TimeoutError:
                    pass

    async def ListAgents(self, request, context):  # noqa: N802
        return scheduler_pb2.ListAgentsResponse(agents=[a.to_proto() for a in self.cluster.agents.values()])

    async def SetAgentEnabled(self, request, context):  # noqa: N802
        if not current_principal().admin:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "only an admin can enable or disable agents"
            )
        try:
            agent = self.cluster.set_enabled(request.agent_id, request.slot_id, request.enabled)
        except KeyError as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e.args[0]))
        if request.enabled:
            self.manager.wake.set()  # queued trials may fit now
        return scheduler_pb2.SetAgentEnabledResponse(agent=agent.to_proto())

    async def GetClusterInfo(self, request, context):  # noqa: N802
        return scheduler_pb2.GetClusterInfoResponse(
            version=__version__,
            checkpoint_store_address=self.manager.checkpoint_store_address,
            cluster_id=self.cluster_id,
        )

    def _experiment(self, exp_id: int) -> scheduler_pb2.Experiment:
        row = experiment_ops.experiment(self.db, exp_id)
        assert row is not None
        return convert.experiment(row, experiment_ops.trial_count(self.db, exp_id))

    async def _experiment_or_abort(self, exp_id: int, context) -> scheduler_pb2.Experiment:
        if experiment_ops.experiment_state(self.db, exp_id) is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {exp_id} not found")
        return self._experiment(exp_id)
