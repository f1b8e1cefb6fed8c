"""`ReportTrialMetrics`: a user's script (an unmanaged Core API trial, a notebook) records a trial's
metrics, through Determined's `POST /api/v1/trials/{id}/metrics` or gRPC.

Rows land in the tables the harness's results land in, so `pedl trial describe`, the web UI and
`GetMetrics` show them; they steer no searcher and no checkpoint GC (those follow the trial's own
workloads). A second report at the same `steps_completed` and kind is refused, not merged.
"""

from __future__ import annotations

from typing import Any

import grpc
import grpc.aio

from pedl._timeutil import utc_now
from pedl.v1 import scheduler_pb2
from pedl_scheduler import metrics as prometheus
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.metric_reports import MetricReport, ReportError
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import metric_groups
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_scheduler.store_questions import LIVE_TRIAL_STATES
from pedl_server_auth import authz, current_principal
from pedl_server_auth.authz import Access


class MetricReportRpcs:
    manager: ExperimentManager
    db: Any

    async def ReportTrialMetrics(  # noqa: N802
        self, request: scheduler_pb2.ReportTrialMetricsRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.ReportTrialMetricsResponse:
        try:
            report = MetricReport.from_request(request)
        except ReportError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        row = trial_ops.trial(self.db, report.trial_id)
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"trial {report.trial_id} not found")
        refused = self._refusal(row)
        if refused:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refused)
        if self._stored(report):
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"trial {report.trial_id} already has {report.group or report.kind} metrics at "
                f"steps_completed {report.steps_completed}",
            )
        when = report.report_time or utc_now()
        step_id = result_ops.step_count_of(self.db, report.trial_id) + (report.kind == "training")
        run_id = max(1, row["run_id"])  # the run reporting (runs count from 1)
        with self.db.transaction():
            if report.group:
                metric_groups.record(
                    self.db,
                    report.trial_id,
                    report.group,
                    report.steps_completed,
                    report.metrics_json,
                    when,
                    run_id,
                )
            elif report.kind == "training":
                result_ops.record_step(
                    self.db,
                    report.trial_id,
                    step_id,
                    report.steps_completed,
                    0,
                    report.metrics_json,
                    when,
                    run_id=run_id,
                )
            else:
                result_ops.record_validation(
                    self.db,
                    report.trial_id,
                    step_id,
                    report.steps_completed,
                    report.metrics_json,
                    when,
                    run_id=run_id,
                )
        if not report.group:
            (prometheus.step_ingested if report.kind == "training" else prometheus.validation_ingested)()
        self.manager.state.notify()  # metric streams following the trial read the new row
        return scheduler_pb2.ReportTrialMetricsResponse()

    def _refusal(self, row: Any) -> str | None:
        """The trial's own live run's token, or the experiment's owner or an admin."""
        principal = current_principal()
        if principal.kind == "trial":
            live = row["state"] in LIVE_TRIAL_STATES
            return authz.own_trial_refusal(principal, row["id"], row["run_id"], live)
        exp_id = row["experiment_id"]
        owner = experiment_ops.experiment_owner(self.db, exp_id)
        if authz.may(principal, Access.MANAGE, owner, private=True):
            return None
        return authz.refusal(principal, Access.MANAGE, exp_id, owner)

    def _stored(self, report: MetricReport) -> bool:
        at = report.steps_completed
        if report.group:
            return metric_groups.stored_at(self.db, report.trial_id, report.group, at)
        if report.kind == "training":
            rows = result_ops.steps_page(self.db, report.trial_id, at - 1, 1)
        else:
            rows = result_ops.validations_between(self.db, report.trial_id, at - 1, at)
        return any(r["total_batches"] == at for r in rows)
