"""The handlers of Determined's `metrics-stream` endpoints: one experiment's `GetMetrics` stream,
followed until the experiment ends, read through a view of `metric_streams`.

The first message goes out once the stored rows are read (empty for an experiment that has
stored none yet, as Determined's first poll is); after it, one per scheduler reply that brings
news. pedl sends each row as the scheduler stores it, so `period_seconds` is checked but no
reply waits for it.
"""

from __future__ import annotations

from typing import Any, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from pedl import records
from pedl._metrics import from_struct
from pedl.v1 import scheduler_pb2
from pedl_webui import configs
from pedl_webui.rest.common import Caller, caller, ndjson, path_id, results
from pedl_webui.rest.metric_streams import (
    NAME_POINTS,
    MetricBatches,
    MetricNames,
    StreamQuery,
    TrialsSample,
    TrialsSnapshot,
    trial_ids,
)


class View(Protocol):
    def absorb(self, reply: scheduler_pb2.GetMetricsResponse, hparams: dict[int, Any]) -> None: ...

    def message(self) -> tuple[dict[str, Any], bool]: ...


def _query(request: Request, endpoint: str) -> StreamQuery:
    params = {k: request.query_params.getlist(k) for k in request.query_params}
    experiment_id = path_id(request, "experimentId") if endpoint != "names" else 0
    return StreamQuery.parse(endpoint, params, experiment_id)


def _hparams(c: Caller, space: Any, trial_id: int) -> Any:
    reply = c.call("GetTrial", scheduler_pb2.GetTrialRequest(trial_id=trial_id, page_size=1))
    return records.typed_hparams(from_struct(reply.trial.hparams), space)


async def _stream(
    c: Caller,
    experiment: scheduler_pb2.Experiment,
    view: View,
    kind: scheduler_pb2.MetricKind.ValueType,
    with_hparams: bool,
    max_points: int = 0,
) -> Response:
    space = configs.hparam_space(configs.experiment_config(experiment)) if with_hparams else None
    hparams: dict[int, Any] = {}
    caught_up = [False, False]  # the stored rows are read; the first message went out

    async def encode(reply: scheduler_pb2.GetMetricsResponse) -> str:
        if with_hparams:
            for trial_id in sorted(trial_ids(reply) - hparams.keys()):
                hparams[trial_id] = await run_in_threadpool(_hparams, c, space, trial_id)
        view.absorb(reply, hparams)
        caught_up[0] = caught_up[0] or reply.caught_up
        if not caught_up[0]:
            return ""
        message, news = view.message()
        if caught_up[1] and not news:
            return ""
        caught_up[1] = True
        return results([message])

    request = scheduler_pb2.GetMetricsRequest(
        experiment_id=experiment.id, follow=True, kind=kind, max_points=max_points
    )
    return await ndjson(c.gateway.stream(c.token, "GetMetrics", request), encode)


async def _experiment(c: Caller, experiment_id: int) -> scheduler_pb2.Experiment:
    reply = await run_in_threadpool(
        c.call, "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=experiment_id)
    )
    experiment: scheduler_pb2.Experiment = reply.experiment
    return experiment


async def metric_names(request: Request) -> Response:
    """`GET /api/v1/experiments/metrics-stream/metric-names?ids=`: each metric's name once, read from
    each trial's rows cut to `NAME_POINTS` (as the project's columns read them)."""
    query, c = _query(request, "names"), caller(request)
    exp = await _experiment(c, query.experiment_ids[0])
    view = MetricNames(exp.searcher_metric)
    kind = scheduler_pb2.METRIC_KIND_UNSPECIFIED
    return await _stream(c, exp, view, kind, with_hparams=False, max_points=NAME_POINTS)


async def metric_batches(request: Request) -> Response:
    """`GET .../{experimentId}/metrics-stream/batches`: the batches at which a metric was stored."""
    query, c = _query(request, "batches"), caller(request)
    exp = await _experiment(c, query.experiment_ids[0])
    return await _stream(c, exp, MetricBatches(query), query.kind, with_hparams=False)


async def trials_snapshot(request: Request) -> Response:
    """`GET .../{experimentId}/metrics-stream/trials-snapshot`: each trial's metric at a point."""
    query, c = _query(request, "snapshot"), caller(request)
    exp = await _experiment(c, query.experiment_ids[0])
    return await _stream(c, exp, TrialsSnapshot(query), query.kind, with_hparams=True)


async def trials_sample(request: Request) -> Response:
    """`GET .../{experimentId}/metrics-stream/trials-sample`: the best trials' metric over time."""
    query, c = _query(request, "sample"), caller(request)
    exp = await _experiment(c, query.experiment_ids[0])
    view = TrialsSample(query, exp.searcher_metric, exp.smaller_is_better)
    return await _stream(c, exp, view, scheduler_pb2.METRIC_KIND_UNSPECIFIED, with_hparams=True)
