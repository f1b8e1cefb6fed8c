"""An in-process SchedulerService with scripted answers, so CLI commands run against real gRPC."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc

from pedl._metrics import to_struct
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc


@dataclass
class Script:
    """Each Get* call returns the next snapshot; the last one repeats."""

    experiments: list[scheduler_pb2.GetExperimentResponse] = field(default_factory=list)
    trials: dict[int, list[scheduler_pb2.GetTrialResponse]] = field(default_factory=dict)
    logs: list[common_pb2.LogLine] = field(default_factory=list)
    agents: list[scheduler_pb2.Agent] = field(default_factory=list)
    model_definition: bytes = b""
    created: list[scheduler_pb2.CreateExperimentRequest] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    log_requests: list[scheduler_pb2.GetTrialLogsRequest] = field(default_factory=list)
    trial_requests: list[scheduler_pb2.GetTrialRequest] = field(default_factory=list)
    # GetMetrics answers with those of a trial and group (a custom group's rows).
    metric_series: list[scheduler_pb2.MetricSeries] = field(default_factory=list)
    # Whether UploadExperiment is served (else UNIMPLEMENTED, as from an older scheduler); parts seen.
    uploads: bool = False
    upload_parts: list[int] = field(default_factory=list)


def _next(snapshots: list, context: grpc.ServicerContext, what: str):  # type: ignore[no-untyped-def]
    if not snapshots:
        context.abort(grpc.StatusCode.NOT_FOUND, f"{what} not found")
    return snapshots.pop(0) if len(snapshots) > 1 else snapshots[0]


class FakeScheduler(scheduler_pb2_grpc.SchedulerServiceServicer):
    def __init__(self, script: Script) -> None:
        self.script = script

    def CreateExperiment(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        self.script.created.append(request)
        return scheduler_pb2.CreateExperimentResponse(experiment=scheduler_pb2.Experiment(id=7, state=1))

    def UploadExperiment(self, request_iterator, context):  # type: ignore[no-untyped-def]  # noqa: N802
        if not self.script.uploads:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        chunks = list(request_iterator)
        self.script.upload_parts.extend(len(c.model_definition) for c in chunks)
        request = scheduler_pb2.CreateExperimentRequest(
            config_yaml=chunks[0].config_yaml,
            model_definition_name=chunks[0].model_definition_name,
            model_definition=b"".join(c.model_definition for c in chunks),
        )
        created = self.CreateExperiment(request, context)
        return scheduler_pb2.UploadExperimentResponse(experiment=created.experiment)

    def ListExperiments(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        return scheduler_pb2.ListExperimentsResponse(
            experiments=[e.experiment for e in self.script.experiments]
        )

    def GetExperiment(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        return _next(self.script.experiments, context, f"experiment {request.experiment_id}")

    def WaitExperiment(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        # Answers at once with the next snapshot, as a scheduler would once the state changed.
        snapshot = _next(self.script.experiments, context, f"experiment {request.experiment_id}")
        return scheduler_pb2.WaitExperimentResponse(experiment=snapshot.experiment)

    def KillExperiment(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        self.script.killed.append(request.experiment_id)
        experiment = scheduler_pb2.Experiment(
            id=request.experiment_id, state=common_pb2.EXPERIMENT_STATE_CANCELED
        )
        return scheduler_pb2.KillExperimentResponse(experiment=experiment)

    def GetModelDefinition(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        return scheduler_pb2.GetModelDefinitionResponse(
            model_definition=self.script.model_definition, model_definition_name="model"
        )

    def GetTrial(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        self.script.trial_requests.append(request)
        return _next(self.script.trials.get(request.trial_id, []), context, f"trial {request.trial_id}")

    def ListTrialDetails(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        """The scripted trials in id order, `limit` at a time; steps only when asked for."""
        ids = sorted(i for i in self.script.trials if i > request.after_trial_id)
        page = ids[: request.limit] if request.limit else ids
        details = []
        for trial_id in page:
            detail = scheduler_pb2.GetTrialResponse()
            detail.CopyFrom(_next(self.script.trials[trial_id], context, f"trial {trial_id}"))
            if not request.include_steps:
                del detail.steps[:]
            details.append(detail)
        more = request.limit and len(page) == request.limit and ids[len(page) :]
        return scheduler_pb2.ListTrialDetailsResponse(
            trials=details, next_after_trial_id=page[-1] if more else 0
        )

    def GetTrialLogs(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        """As a scheduler from before GetTrialLogs.tail: every line after `after_id`."""
        self.script.log_requests.append(request)
        lines = [line for line in self.script.logs if line.id > request.after_id]
        yield scheduler_pb2.GetTrialLogsResponse(lines=lines)

    def GetMetrics(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        series = [
            s for s in self.script.metric_series if (s.trial_id, s.group) == (request.trial_id, request.group)
        ]
        yield scheduler_pb2.GetMetricsResponse(series=series, caught_up=True)

    def ListAgents(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        return scheduler_pb2.ListAgentsResponse(agents=self.script.agents)


@contextmanager
def serve(script: Script) -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(FakeScheduler(script), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


def trial(trial_id: int, state: int = common_pb2.TRIAL_STATE_ACTIVE, **fields) -> scheduler_pb2.Trial:  # type: ignore[no-untyped-def]
    return scheduler_pb2.Trial(
        id=trial_id, experiment_id=7, state=state, hparams=to_struct({"lr": 0.1, "layers": 2}), **fields
    )


def step(step_id: int, batches: int, loss: float, **metrics: float) -> scheduler_pb2.Step:
    return scheduler_pb2.Step(
        step_id=step_id,
        total_batches=batches,
        num_batches=100,
        metrics=to_struct({"loss": loss, **metrics}),
        end_time="2024-05-01T12:00:03.123Z",
    )


def validation(step_id: int, batches: int, **metrics: float) -> scheduler_pb2.Validation:
    return scheduler_pb2.Validation(step_id=step_id, total_batches=batches, metrics=to_struct(metrics))
