"""SchedulerService: the user-facing API, a thin layer over the ExperimentManager and the DB."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from pedl.config import ConfigError, carried, parse_experiment_config
from pedl.context.errors import ContextError
from pedl.context.unpack import check_archive
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc
from pedl_checkpoint_store.s3_allow import S3Allowance
from pedl_scheduler import (
    convert,
    experiment_delete,
    experiment_listing,
    experiment_patch,
    metrics_stream,
    paging,
    trial_pages,
)
from pedl_scheduler.bind_check import check_bind_mounts
from pedl_scheduler.checkpoint_metadata import CheckpointMetadataRpcs
from pedl_scheduler.checkpoint_removal import CheckpointRemovalRpcs
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.cluster_rpcs import ClusterRpcs
from pedl_scheduler.experiment_wait import wait_for_end
from pedl_scheduler.experiments import ExperimentManager, NotFound, UserError
from pedl_scheduler.metric_report_rpc import MetricReportRpcs
from pedl_scheduler.request_limits import LimitExceeded
from pedl_scheduler.storage import Row
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import timelines as timeline_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_scheduler.storage_check import StorageCheckError, check_checkpoint_storage
from pedl_scheduler.trial_lookup import TrialLookup
from pedl_server_auth import authz, current_principal
from pedl_server_auth.authz import Access

TERMINAL = ("COMPLETED", "ERROR", "CANCELED")


_Servicer = scheduler_pb2_grpc.SchedulerServiceServicer


class SchedulerApi(
    ClusterRpcs, MetricReportRpcs, CheckpointMetadataRpcs, CheckpointRemovalRpcs, TrialLookup, _Servicer
):
    def __init__(
        self,
        manager: ExperimentManager,
        cluster: Cluster,
        cluster_id: str,
        storage_roots: Sequence[Path] | None = None,
        private: bool = False,
        allowed_s3: S3Allowance | None = None,
        master_config: dict[str, Any] | None = None,
        bind_roots: Sequence[Path] | None = None,
    ) -> None:
        self.manager = manager
        # `det master config`: the settings it started with (master_config.settings).
        self.master_config = master_config or {}
        self.bind_roots = bind_roots  # bind_mounts' host paths (--allowed-bind-root); None: any
        # Which S3 buckets/endpoints experiments may name (--allowed-s3-bucket/-endpoint); None: any.
        self.allowed_s3 = allowed_s3
        # Where shared_fs checkpoint storage may lie (--allowed-storage-root); None: anywhere.
        self.storage_roots = storage_roots
        self.db = manager.db
        self.cluster = cluster
        self.cluster_id = cluster_id
        # --private-experiments: users who are not admins read only their own (pedl_server_auth.authz).
        self.private = private

    async def CreateExperiment(  # noqa: N802
        self, request: scheduler_pb2.CreateExperimentRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.CreateExperimentResponse:
        return await self._create(request, context)

    async def UploadExperiment(  # noqa: N802
        self,
        request_iterator: AsyncIterator[scheduler_pb2.UploadExperimentRequest],
        context: grpc.aio.ServicerContext,
    ) -> scheduler_pb2.UploadExperimentResponse:
        request, parts, size = scheduler_pb2.CreateExperimentRequest(), list[bytes](), 0
        limit = self.manager.model_definition_limit
        async for chunk in request_iterator:
            if not parts:
                request.config_yaml, request.model_definition_name, request.paused = (
                    chunk.config_yaml,
                    chunk.model_definition_name,
                    chunk.paused,
                )
            size += len(chunk.model_definition)
            if size > limit:  # refused before it is all held in memory
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"the model definition is over the scheduler's limit of {limit / 2**20:.0f} MiB "
                    "compressed (--model-definition-limit-mb raises it); leave large files out "
                    "with .pedlignore",
                )
            parts.append(chunk.model_definition)
        request.model_definition = b"".join(parts)
        created = await self._create(request, context)
        return scheduler_pb2.UploadExperimentResponse(experiment=created.experiment)

    async def _create(
        self, request: scheduler_pb2.CreateExperimentRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.CreateExperimentResponse:
        try:  # before anything parses the config
            self.manager.request_limits.check_config_size(request.config_yaml)
        except LimitExceeded as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        try:  # the one parse of this request's config: everything after gets the typed object
            config = await asyncio.to_thread(parse_experiment_config, request.config_yaml)
        except ConfigError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid experiment config: {e}")
        try:
            await asyncio.to_thread(check_checkpoint_storage, config, self.storage_roots, self.allowed_s3)
            check_bind_mounts(config, self.bind_roots)  # BindMountRefused is one too
        except StorageCheckError as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        if request.model_definition:  # what an agent would refuse to unpack is refused here
            try:
                await asyncio.to_thread(check_archive, request.model_definition)
            except ContextError as e:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the model definition is refused: {e}")
        try:
            principal, warns = current_principal(), list[str]()
            exp_id = self.manager.lifecycle.create_experiment(
                config,
                request.model_definition,
                request.model_definition_name,
                owner=principal.username if principal.kind == "user" else "",
                requester=principal,
                warnings=warns if request.queue_if_no_agent_fits else None,
            )
            if request.paused:  # before the scheduling pass can run (no await since the create)
                self.manager.lifecycle.pause_experiment(exp_id)
        except UserError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return scheduler_pb2.CreateExperimentResponse(experiment=self._experiment(exp_id), warnings=warns)

    async def ListExperiments(  # noqa: N802
        self, request: scheduler_pb2.ListExperimentsRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.ListExperimentsResponse:
        try:
            rows, next_token = experiment_listing.requested_page(self.db, request)
        except (paging.PageError, ValueError) as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        principal = current_principal()
        rows = [r for r in rows if authz.may(principal, Access.READ, r["owner"], self.private)]
        return scheduler_pb2.ListExperimentsResponse(
            experiments=[self._message(r, r["num_trials"], request.with_config_document) for r in rows],
            next_page_token=next_token,
        )

    async def GetExperiment(  # noqa: N802
        self, request: scheduler_pb2.GetExperimentRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.GetExperimentResponse:
        await self._require(request.experiment_id, Access.READ, context)
        exp = await self._experiment_or_abort(request.experiment_id, context)
        rows = trial_ops.trials_with_step_counts(self.db, request.experiment_id)
        trials = [self._trial(r, r["num_steps"]) for r in rows]
        return scheduler_pb2.GetExperimentResponse(experiment=exp, trials=trials)

    async def WaitExperiment(  # noqa: N802
        self, request: scheduler_pb2.WaitExperimentRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.WaitExperimentResponse:
        exp_id = request.experiment_id
        await self._require(exp_id, Access.READ, context)
        current = lambda: experiment_ops.experiment_state(self.db, exp_id)  # noqa: E731
        state = await wait_for_end(current, self.manager.changed, request.timeout_seconds)
        if state is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {exp_id} not found")
        return scheduler_pb2.WaitExperimentResponse(experiment=self._experiment(exp_id))

    async def KillExperiment(  # noqa: N802
        self, request: scheduler_pb2.KillExperimentRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.KillExperimentResponse:
        await self._lifecycle(self.manager.lifecycle.kill_experiment, request.experiment_id, context)
        return scheduler_pb2.KillExperimentResponse(experiment=self._experiment(request.experiment_id))

    async def PauseExperiment(  # noqa: N802
        self, request: scheduler_pb2.PauseExperimentRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.PauseExperimentResponse:
        await self._lifecycle(self.manager.lifecycle.pause_experiment, request.experiment_id, context)
        return scheduler_pb2.PauseExperimentResponse(experiment=self._experiment(request.experiment_id))

    async def ActivateExperiment(  # noqa: N802
        self, request: scheduler_pb2.ActivateExperimentRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.ActivateExperimentResponse:
        await self._lifecycle(self.manager.rooms.activate_experiment, request.experiment_id, context)
        return scheduler_pb2.ActivateExperimentResponse(experiment=self._experiment(request.experiment_id))

    async def PatchExperiment(  # noqa: N802
        self, request: scheduler_pb2.PatchExperimentRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.PatchExperimentResponse:
        exp_id = request.experiment_id
        await self._require(exp_id, Access.MANAGE, context)
        row = experiment_ops.experiment(self.db, exp_id)
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {exp_id} not found")
        try:
            limits = self.manager.request_limits
            updates = experiment_patch.changes(
                row, request, limits.max_description_length, limits.max_label_length
            )
            live = self.manager.experiments.get(exp_id)  # its typed config, parsed at create or recovery
            held = live.config if live is not None else None
            config = experiment_patch.config_change(row, request, limits.max_name_length, held)
        except experiment_patch.PatchError as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        gc = request.HasField("gc_policy")
        if request.dry_run:
            rooms = self.manager.rooms
            doomed = rooms.reconfigure(exp_id, config, collect=gc, dry_run=True) if config else []
            return scheduler_pb2.PatchExperimentResponse(
                experiment=self._experiment(exp_id), deleted_checkpoints=doomed
            )
        if config is not None:
            updates.update(config_json=carried.stored_json(config), config_yaml=config.masked_yaml())
        experiment_ops.patch_experiment(self.db, exp_id, **updates)
        self.db.flush()
        doomed = self.manager.rooms.reconfigure(exp_id, config, collect=gc) if config is not None else []
        return scheduler_pb2.PatchExperimentResponse(
            experiment=self._experiment(exp_id), deleted_checkpoints=doomed
        )

    async def DeleteExperiment(  # noqa: N802
        self, request: scheduler_pb2.DeleteExperimentRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.DeleteExperimentResponse:
        exp_id = request.experiment_id
        await self._require(exp_id, Access.MANAGE, context)
        if experiment_ops.experiment_state(self.db, exp_id) is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {exp_id} not found")
        try:
            deleted = await experiment_delete.delete_experiment(
                self.db, self.manager.checkpoint_store_address, exp_id, exp_id in self.manager.experiments
            )
        except experiment_delete.DeleteError as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        return scheduler_pb2.DeleteExperimentResponse(deleted_checkpoints=deleted)

    async def KillTrial(  # noqa: N802
        self, request: scheduler_pb2.KillTrialRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.KillTrialResponse:
        row = trial_ops.trial(self.db, request.trial_id)
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"trial {request.trial_id} not found")
        trial_id = row["id"]
        kill = self.manager.lifecycle.kill_trial
        await self._lifecycle(lambda _: kill(trial_id), row["experiment_id"], context)
        row = trial_ops.trial(self.db, request.trial_id)
        if row is None:  # deleted meanwhile
            await context.abort(grpc.StatusCode.NOT_FOUND, f"trial {request.trial_id} not found")
        return scheduler_pb2.KillTrialResponse(trial=self._trial(row, 0))

    async def _require(self, exp_id: int, access: Access, context: grpc.aio.ServicerContext) -> None:
        """The object half of authz: an experiment that does not exist is left to NOT_FOUND."""
        owner = experiment_ops.experiment_owner(self.db, exp_id)
        principal = current_principal()
        if owner is not None and not authz.may(principal, access, owner, self.private):
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, authz.refusal(principal, access, exp_id, owner)
            )

    async def _check_owner(self, exp_id: int, context: grpc.aio.ServicerContext) -> None:
        """A change to the experiment: its owner or an admin (authz.Access.MANAGE)."""
        await self._require(exp_id, Access.MANAGE, context)

    async def _require_trial(self, trial_id: int, context: grpc.aio.ServicerContext) -> None:
        row = trial_ops.trial(self.db, trial_id)
        if row is not None:
            await self._require(row["experiment_id"], Access.READ, context)

    async def _lifecycle(
        self, action: Callable[[int], object], exp_id: int, context: grpc.aio.ServicerContext
    ) -> None:
        await self._require(exp_id, Access.MANAGE, context)
        try:
            action(exp_id)
        except NotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except UserError as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))

    async def GetModelDefinition(  # noqa: N802
        self, request: scheduler_pb2.GetModelDefinitionRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.GetModelDefinitionResponse:
        await self._require(request.experiment_id, Access.READ, context)
        row = experiment_ops.model_definition(self.db, request.experiment_id)
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {request.experiment_id} not found")
        return scheduler_pb2.GetModelDefinitionResponse(
            model_definition=row["model_definition"],
            model_definition_name=row["model_definition_name"],
        )

    def _trial(self, row: dict[str, Any], num_steps: int) -> scheduler_pb2.Trial:
        trial_id, manager = row["id"], self.manager
        return convert.trial(
            row, manager.runs.trial_agent(trial_id), num_steps, manager.trial_waiting_reason(trial_id)
        )

    async def GetTrial(  # noqa: N802
        self, request: scheduler_pb2.GetTrialRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.GetTrialResponse:
        row = await self._asked_trial(request, context)
        try:
            found = trial_pages.requested_page(self.db, row["id"], request)
        except paging.PageError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        figures = request.group_figures
        groups = [] if request.page_token else trial_pages.group_summaries(self.db, row["id"], figures)
        return scheduler_pb2.GetTrialResponse(
            trial=self._trial(row, found.num_steps),
            steps=[convert.step(s) for s in found.steps],
            validations=[convert.validation(v) for v in found.validations],
            checkpoints=[convert.checkpoint(c) for c in found.checkpoints],
            timeline=[common_pb2.TimelinePhase(**p) for p in timeline_ops.of_trial(self.db, row["id"])],
            next_page_token=found.next_page_token,
            metric_groups=groups,
        )

    async def ListTrialDetails(  # noqa: N802
        self, request: scheduler_pb2.ListTrialDetailsRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.ListTrialDetailsResponse:
        await self._require(request.experiment_id, Access.READ, context)
        await self._experiment_or_abort(request.experiment_id, context)
        if request.limit < 0 or request.after_trial_id < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "limit and after_trial_id must be >= 0")
        limit = min(request.limit or paging.DEFAULT_PAGE, paging.MAX_PAGE)
        rows = trial_ops.trials_page(self.db, request.experiment_id, request.after_trial_id, limit)
        ids = [r["id"] for r in rows]
        by_trial = trial_pages.results_of_trials(self.db, ids, request.include_steps)
        details = [
            scheduler_pb2.GetTrialResponse(
                trial=self._trial(r, r["num_steps"]),
                steps=[convert.step(x) for x in by_trial[r["id"]]["steps"]],
                validations=[convert.validation(x) for x in by_trial[r["id"]]["validations"]],
                checkpoints=[convert.checkpoint(x) for x in by_trial[r["id"]]["checkpoints"]],
            )
            for r in rows
        ]
        return scheduler_pb2.ListTrialDetailsResponse(
            trials=details, next_after_trial_id=ids[-1] if len(ids) == limit else 0
        )

    async def GetTrialLogs(  # noqa: N802
        self, request: scheduler_pb2.GetTrialLogsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[scheduler_pb2.GetTrialLogsResponse]:
        await self._require_trial(request.trial_id, context)
        if not trial_ops.trial_exists(self.db, request.trial_id):
            await context.abort(grpc.StatusCode.NOT_FOUND, f"trial {request.trial_id} not found")
        if request.tail < 0:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"tail must be 0 or more, got {request.tail}"
            )
        after = request.after_id
        if request.tail:
            after = max(after, result_ops.log_id_before_tail(self.db, request.trial_id, request.tail))
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

    async def GetMetrics(  # noqa: N802
        self, request: scheduler_pb2.GetMetricsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[scheduler_pb2.GetMetricsResponse]:
        try:
            query = metrics_stream.MetricsQuery.from_request(request)
        except metrics_stream.MetricsRequestError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        if request.HasField("trial_id"):
            await self._require_trial(request.trial_id, context)
        else:
            await self._require(request.experiment_id, Access.READ, context)
        try:
            async for response in metrics_stream.stream(self.db, query, self._wait_for_change):
                yield response
        except LookupError as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e.args[0]))

    async def _wait_for_change(self) -> None:
        """Until the next committed change (results, states), or a second at most."""
        async with self.manager.changed:
            try:
                await asyncio.wait_for(self.manager.changed.wait(), timeout=1.0)
            except asyncio.TimeoutError:
                pass

    def _experiment(self, exp_id: int) -> scheduler_pb2.Experiment:
        row = experiment_ops.experiment(self.db, exp_id)
        assert row is not None
        return self._message(row, experiment_ops.trial_count(self.db, exp_id))

    def _message(self, row: Row, num_trials: int, document: bool = True) -> scheduler_pb2.Experiment:
        """A running experiment's config_document comes from its config parsed at create or recovery."""
        live = self.manager.experiments.get(row["id"])
        return convert.experiment(row, num_trials, document=document, live=live.config if live else None)

    async def _experiment_or_abort(
        self, exp_id: int, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.Experiment:
        if experiment_ops.experiment_state(self.db, exp_id) is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {exp_id} not found")
        return self._experiment(exp_id)
