"""The JSON API behind the pages: scheduler calls as the user, shaped by `views`."""

from __future__ import annotations

import threading
from typing import Any

from pedl import records
from pedl.v1 import scheduler_pb2
from pedl_webui import views
from pedl_webui.gateway import Gateway, GatewayError

ACTIONS = {
    "kill": ("KillExperiment", scheduler_pb2.KillExperimentRequest),
    "pause": ("PauseExperiment", scheduler_pb2.PauseExperimentRequest),
    "activate": ("ActivateExperiment", scheduler_pb2.ActivateExperimentRequest),
}


class _EndedSummaries:
    """Summaries of ended experiments, which never change again: the experiments page asks the
    scheduler only about live ones on each refresh. Keyed by (user, id): visibility is per user."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[tuple[str, int], dict[str, Any]] = {}

    def get(self, token: str, exp_id: int) -> dict[str, Any] | None:
        with self._lock:
            return self._rows.get((token, exp_id))

    def put(self, token: str, exp_id: int, row: dict[str, Any]) -> None:
        with self._lock:
            if len(self._rows) > 50_000:
                self._rows.clear()
            self._rows[(token, exp_id)] = row


_ENDED = _EndedSummaries()


def exists(gateway: Gateway, token: str, kind: str, ident: int) -> None:
    """Raises GatewayError(404) when the experiment or trial is unknown (to this user)."""
    if kind == "experiments":  # one trial's page, not all the trials: as cheap at 1,000 trials
        gateway.call(
            token, "ListTrialDetails", scheduler_pb2.ListTrialDetailsRequest(experiment_id=ident, limit=1)
        )
    else:
        gateway.call(token, "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=ident))


def experiments(gateway: Gateway, token: str) -> list[dict[str, Any]]:
    listed = gateway.call(token, "ListExperiments", scheduler_pb2.ListExperimentsRequest()).experiments
    rows = []
    for exp in sorted(listed, key=lambda e: -e.id):
        state = records.experiment_state(exp.state)
        cached = _ENDED.get(token, exp.id)
        if cached is not None and state in views.TERMINAL and cached["archived"] == exp.archived:
            rows.append(cached)
            continue
        try:
            response = gateway.call(
                token, "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=exp.id)
            )
        except GatewayError as e:
            if e.status == 404:  # deleted since the list
                continue
            raise
        row = views.experiment_summary(response)
        if row["state"] in views.TERMINAL:
            _ENDED.put(token, exp.id, row)
        rows.append(row)
    return rows


def experiment(gateway: Gateway, token: str, exp_id: int) -> dict[str, Any]:
    response = gateway.call(token, "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=exp_id))
    return views.experiment_detail(response)


def trial(gateway: Gateway, token: str, trial_id: int) -> dict[str, Any]:
    response = gateway.call(token, "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=trial_id))
    exp = gateway.call(
        token, "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=response.trial.experiment_id)
    ).experiment
    detail = views.trial_detail(response, exp.config_yaml)
    return detail | {
        "experiment": {
            "id": exp.id,
            "owner": exp.owner,
            "state": records.experiment_state(exp.state),
            "searcher_metric": exp.searcher_metric,
            "smaller_is_better": exp.smaller_is_better,
            "description": exp.description,
        }
    }


def act(gateway: Gateway, token: str, exp_id: int, action: str) -> dict[str, Any]:
    """Kill, pause or activate; the scheduler decides whether this user may (owner or admin)."""
    method, request_type = ACTIONS[action]
    reply = gateway.call(token, method, request_type(experiment_id=exp_id))
    return {"id": exp_id, "state": records.experiment_state(reply.experiment.state)}


def cluster(gateway: Gateway, token: str) -> dict[str, Any]:
    agents = gateway.call(token, "ListAgents", scheduler_pb2.ListAgentsRequest()).agents
    listed = gateway.call(token, "ListExperiments", scheduler_pb2.ListExperimentsRequest()).experiments
    live = []
    for exp in listed:
        if records.experiment_state(exp.state) in ("ACTIVE", "PAUSED"):
            try:
                live.append(
                    gateway.call(
                        token, "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=exp.id)
                    )
                )
            except GatewayError as e:
                if e.status != 404:
                    raise
    return views.cluster_view(list(agents), live)


def event_json(message: Any) -> str:
    """One SSE event's data for a scheduler stream message (metrics or log lines)."""
    if isinstance(message, scheduler_pb2.GetMetricsResponse):
        return views.metrics_event(message)
    return views.log_event(message.lines)
