"""The JSON API behind the pages: scheduler calls as the user, shaped by `views`."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from pedl import records
from pedl.importance import ImportanceUnavailable
from pedl.v1 import common_pb2, scheduler_pb2
from pedl_webui import importance_cache, views
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


# The experiments page's rows per page (the browser asks for one of these; bounded either way).
PAGE_SIZE, MAX_PAGE_SIZE = 50, 200
STATES = ("ACTIVE", "PAUSED", "COMPLETED", "ERROR", "CANCELED")


def _state_value(name: str) -> common_pb2.ExperimentState.ValueType:
    return common_pb2.ExperimentState.Value("EXPERIMENT_STATE_" + name)


def exists(gateway: Gateway, token: str, kind: str, ident: int) -> None:
    """Raises GatewayError(404) when the experiment or trial is unknown (to this user)."""
    if kind == "experiments":  # one trial's page, not all the trials: as cheap at 1,000 trials
        gateway.call(
            token, "ListTrialDetails", scheduler_pb2.ListTrialDetailsRequest(experiment_id=ident, limit=1)
        )
    else:
        gateway.call(token, "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=ident, page_size=1))


def list_request(query: dict[str, list[str]]) -> scheduler_pb2.ListExperimentsRequest:
    """The experiments page's query (?limit, page, order, state, q, archived) as a scheduler request:
    the filters and the order apply across every page, on the scheduler."""

    def one(name: str, default: str = "") -> str:
        return (query.get(name) or [default])[0].strip()

    limit, page = one("limit", str(PAGE_SIZE)), one("page")
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE_SIZE:
        raise GatewayError(400, f"limit must be 1-{MAX_PAGE_SIZE}, got {limit[:20]!r}")
    if one("order", "newest") not in ("newest", "oldest"):
        raise GatewayError(400, "order must be newest or oldest")
    state = one("state").upper()
    if state and state not in STATES:
        raise GatewayError(400, f"state must be one of {', '.join(STATES)}, got {state[:20]!r}")
    return scheduler_pb2.ListExperimentsRequest(
        page_size=int(limit),
        page_token=page,
        newest_first=one("order", "newest") == "newest",
        states=[_state_value(state)] if state else [],
        exclude_archived=one("archived") not in ("1", "true"),
        text=one("q")[:200],
    )


def experiments(
    gateway: Gateway, token: str, request: scheduler_pb2.ListExperimentsRequest
) -> dict[str, Any]:
    """One page of the experiments page: its rows and the token of the next page ("" at the end)."""
    reply = gateway.call(token, "ListExperiments", request)
    rows = []
    for exp in reply.experiments:
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
    return {"experiments": rows, "next_page": reply.next_page_token}


def experiment(gateway: Gateway, token: str, exp_id: int, trial_ids: Sequence[int] = ()) -> dict[str, Any]:
    """The experiment page's data; of `trial_ids` only, if given (the compare page)."""
    response = gateway.call(token, "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=exp_id))
    return views.experiment_detail(response, frozenset(trial_ids))


def importance(gateway: Gateway, token: str, exp_id: int) -> dict[str, Any]:
    response = gateway.call(token, "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=exp_id))
    try:
        return views.importance_view(response, importance_cache.CACHE.importances(response))
    except ImportanceUnavailable as e:
        raise GatewayError(501, str(e)) from None


def trial(gateway: Gateway, token: str, trial_id: int) -> dict[str, Any]:
    """The trial page's data without its steps (the curves stream them): the trial and its custom
    metric groups' names from a one-step page of GetTrial, its validations and checkpoints from a
    one-trial page of ListTrialDetails."""
    response = gateway.call(token, "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=trial_id, page_size=1))
    exp_id = response.trial.experiment_id
    exp = gateway.call(token, "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=exp_id))
    exp = exp.experiment
    details = gateway.call(
        token,
        "ListTrialDetails",
        scheduler_pb2.ListTrialDetailsRequest(experiment_id=exp_id, after_trial_id=trial_id - 1, limit=1),
    ).trials
    if details and details[0].trial.id == trial_id:
        del response.validations[:], response.checkpoints[:]
        response.validations.extend(details[0].validations)
        response.checkpoints.extend(details[0].checkpoints)
    detail = views.trial_detail(response, exp)
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


def set_notes(gateway: Gateway, token: str, exp_id: int, notes: Any) -> dict[str, Any]:
    """Replaces the experiment's notes; the scheduler lets only its owner or an admin."""
    if not isinstance(notes, str):
        raise GatewayError(400, 'give "notes" as a string')
    request = scheduler_pb2.PatchExperimentRequest(experiment_id=exp_id, notes=notes)
    reply = gateway.call(token, "PatchExperiment", request)
    return {"id": exp_id, "notes": reply.experiment.notes}


def cluster(gateway: Gateway, token: str) -> dict[str, Any]:
    listed = gateway.call(token, "ListAgents", scheduler_pb2.ListAgentsRequest())
    live, page = [], ""
    while True:  # only live experiments hold slots or queue: the scheduler filters, a page at a time
        request = scheduler_pb2.ListExperimentsRequest(
            page_size=MAX_PAGE_SIZE, page_token=page, states=[_state_value(s) for s in STATES[:2]]
        )
        reply = gateway.call(token, "ListExperiments", request)
        for exp in reply.experiments:
            try:
                live.append(
                    gateway.call(
                        token, "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=exp.id)
                    )
                )
            except GatewayError as e:
                if e.status != 404:
                    raise
        page = reply.next_page_token
        if not page:
            return views.cluster_view(
                list(listed.agents), live, list(listed.pilot_jobs), list(listed.gc_tasks)
            )


def event_json(message: Any) -> str:
    """One SSE event's data for a scheduler stream message (metrics or log lines)."""
    if isinstance(message, scheduler_pb2.GetMetricsResponse):
        return views.metrics_event(message)
    return views.log_event(message.lines)
