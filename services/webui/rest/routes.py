"""Every `/api/v1` route and `/info`, with Determined's paths and verbs (its protos'
`google.api.http` mappings), in the order Starlette tries them."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from pedl_webui.gateway import GatewayError
from pedl_webui.rest import (
    cluster,
    experiments,
    job_queue,
    lacking,
    logs,
    master,
    metric_reports,
    metric_stream_routes,
    projects,
    time_series,
    trials,
    workloads,
)
from pedl_webui.rest.errors import is_rest

GET, POST, PATCH, DELETE = ["GET"], ["POST"], ["PATCH"], ["DELETE"]
EXP = "/api/v1/experiments/{experimentId:int}"


def _unknown(request: Request) -> JSONResponse:
    raise GatewayError(404, f"pedl serves no {request.method} {request.url.path}")


def routes() -> list[BaseRoute]:
    table: list[BaseRoute] = [
        Route("/info", master.info, methods=GET),
        Route("/api/v1/master", master.master, methods=GET),
        Route("/api/v1/master/config", master.master_config, methods=GET),
        Route("/api/v1/auth/login", master.login, methods=POST),
        Route("/api/v1/auth/logout", master.logout, methods=POST),
        Route("/api/v1/me", master.me, methods=GET),
        Route("/api/v1/users", master.users, methods=GET),
        Route("/api/v1/users", master.create_user, methods=POST),
        Route("/api/v1/users/{username:str}/by-username", master.user_by_name, methods=GET),
        Route("/api/v1/users/{userId:int}", master.user_by_id, methods=GET),
        Route("/api/v1/users/{userId:int}", master.patch_user, methods=PATCH),
        Route("/api/v1/agents", cluster.agents, methods=GET),
        Route("/api/v1/agents/{agentId:str}", cluster.agent, methods=GET),
        Route("/api/v1/agents/{agentId:str}/slots", cluster.slots, methods=GET),
        Route("/api/v1/resource-pools", cluster.resource_pools, methods=GET),
        Route("/api/v1/tasks", cluster.tasks, methods=GET),
        Route("/tasks", cluster.legacy_tasks, methods=GET),
        Route("/api/v1/job-queues", job_queue.jobs, methods=GET),
        Route("/api/v1/job-queues", job_queue.update, methods=POST),
        Route("/api/v1/job-queues-v2", job_queue.jobs_v2, methods=GET),
        Route("/api/v1/experiments", experiments.list_experiments, methods=GET),
        Route(
            "/api/v1/experiments/metrics-stream/metric-names", metric_stream_routes.metric_names, methods=GET
        ),
        Route(f"{EXP}/metrics-stream/batches", metric_stream_routes.metric_batches, methods=GET),
        Route(f"{EXP}/metrics-stream/trials-snapshot", metric_stream_routes.trials_snapshot, methods=GET),
        Route(f"{EXP}/metrics-stream/trials-sample", metric_stream_routes.trials_sample, methods=GET),
        Route("/api/v1/experiments", projects.create_experiment, methods=POST),
        Route(EXP, experiments.get_experiment, methods=GET),
        Route(EXP, experiments.patch, methods=PATCH),
        Route(EXP, experiments.delete, methods=DELETE),
        *[
            Route(f"{EXP}/{verb}", experiments.act, methods=POST)
            for verb in ("activate", "pause", "cancel", "kill")
        ],
        Route(f"{EXP}/archive", experiments.archive, methods=POST),
        Route(f"{EXP}/unarchive", experiments.archive, methods=POST),
        Route(f"{EXP}/trials", experiments.experiment_trials, methods=GET),
        Route(f"{EXP}/checkpoints", experiments.experiment_checkpoints, methods=GET),
        Route(f"{EXP}/model_def", projects.model_definition, methods=GET),
        Route("/api/v1/trials/metrics/trial_metrics", trials.trial_metrics, methods=GET),
        Route("/api/v1/trials/time-series", time_series.compare_trials, methods=GET),
        Route("/api/v1/trials/{trialId:int}", trials.get_trial, methods=GET),
        Route("/api/v1/trials/{trialId:int}/metrics", metric_reports.report_trial_metrics, methods=POST),
        Route("/api/v1/trials/{trialId:int}/kill", trials.kill_trial, methods=POST),
        Route("/api/v1/trials/{trialId:int}/workloads", workloads.trial_workloads, methods=GET),
        Route("/api/v1/trials/{trialId:int}/logs", logs.trial_logs, methods=GET),
        Route("/api/v1/trials/{trialId:int}/logs/fields", logs.trial_log_fields, methods=GET),
        Route("/api/v1/tasks/{taskId:str}/logs", logs.task_logs, methods=GET),
        Route("/api/v1/tasks/{taskId:str}/logs/fields", logs.task_log_fields, methods=GET),
        Route("/api/v1/trials/{trialId:int}/checkpoints", trials.trial_checkpoints, methods=GET),
        Route("/api/v1/checkpoints/{checkpointUuid:str}", trials.get_checkpoint, methods=GET),
        Route(
            "/api/v1/checkpoints/{checkpointUuid:str}/metadata", trials.post_checkpoint_metadata, methods=POST
        ),
        Route("/api/v1/checkpoints", trials.delete_checkpoints, methods=DELETE),
        Route("/api/v1/checkpoints/rm", trials.remove_checkpoint_files, methods=POST),
        Route("/checkpoints/{checkpointUuid:str}", trials.download_checkpoint, methods=GET),
        Route("/api/v1/workspaces/1", projects.default_workspace, methods=GET),
        Route("/api/v1/projects/1", projects.default_project, methods=GET),
        Route("/api/v1/projects/{id:int}/columns", projects.project_columns_route, methods=GET),
        *lacking.routes(),
        Route("/api/v1/{rest:path}", _unknown, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
    ]
    assert all(
        is_rest(getattr(r, "path", "/api/v1/")) or getattr(r, "path", "").startswith("/checkpoints/")
        for r in table
    )
    return table
