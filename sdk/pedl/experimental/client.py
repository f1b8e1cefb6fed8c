"""Reading and steering a cluster's experiments from Python, with Determined's client surface.

    exp = get_experiment(7)
    exp.wait()
    path = exp.top_checkpoint().download()
    trial = pedl.pytorch.load_trial_from_checkpoint_path(path)

Every failure the cluster reports (unknown id, unreachable scheduler) is a ClientError; a failed
download raises the checkpoint store client's CheckpointError. Trials and checkpoints are in
`trial.py` and `checkpoint.py`; the states and sort orders in `states.py`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

from pedl import importance, records
from pedl.experimental import metrics as _metrics
from pedl.experimental._session import DEFAULT_MASTER, ClientError, Session, resolve_master
from pedl.experimental.checkpoint import (
    Checkpoint,
    CheckpointTrainingMetadata,
    checkpoints_of,
    ranked_checkpoints,
    sorted_checkpoints,
)
from pedl.experimental.checkpoint import (
    get_checkpoint as _get_checkpoint,
)
from pedl.experimental.states import ExperimentState, state_of
from pedl.experimental.trial import Trial, TrialMetrics
from pedl.v1 import scheduler_pb2

__all__ = [
    "DEFAULT_MASTER",
    "Checkpoint",
    "CheckpointTrainingMetadata",
    "ClientError",
    "ExperimentClient",
    "Trial",
    "TrialMetrics",
    "get_checkpoint",
    "get_experiment",
    "get_trial",
    "list_experiments",
    "resolve_master",
]

POLL_SECONDS = 0.5
_TERMINAL = frozenset({"COMPLETED", "ERROR", "CANCELED"})


class ExperimentClient:
    """An experiment on the cluster; every property and method asks the scheduler afresh."""

    def __init__(self, experiment_id: int, session: Session) -> None:
        self.id = experiment_id
        self._session = session

    def __repr__(self) -> str:
        return f"ExperimentClient(id={self.id}, master={self._session.master!r})"

    def __enter__(self) -> ExperimentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._session.close()

    def _get(self) -> scheduler_pb2.GetExperimentResponse:
        request = scheduler_pb2.GetExperimentRequest(experiment_id=self.id)
        return self._session.call("GetExperiment", request, f"experiment {self.id}")

    # -- what it is ----------------------------------------------------------------------------

    @property
    def state(self) -> ExperimentState:
        """ACTIVE, PAUSED, COMPLETED, ERROR or CANCELED (equal to those strings)."""
        return state_of(ExperimentState, records.experiment_state(self._get().experiment.state))

    @property
    def config(self) -> dict[str, Any]:
        """The validated config (defaults filled in, secrets masked), from the scheduler's typed
        config document."""
        return records.config_mapping(self._get().experiment)

    def get_config(self) -> dict[str, Any]:
        return self.config

    @property
    def name(self) -> str:
        return self._get().experiment.name

    @property
    def description(self) -> str:
        return self._get().experiment.description

    @property
    def labels(self) -> list[str]:
        return list(self._get().experiment.labels)

    @property
    def archived(self) -> bool:
        return self._get().experiment.archived

    @property
    def start_time(self) -> str:
        return self._get().experiment.created_at

    @property
    def end_time(self) -> str | None:
        return self._get().experiment.ended_at or None

    @property
    def notes(self) -> str:
        """The free text kept on the experiment (the web UI's notes pane, `pedl e note`)."""
        return self._get().experiment.notes

    def importance(self) -> dict[str, float]:
        """Each hyperparameter's importance to the searcher metric (PED-ANOVA, summing to 1), most
        important first; empty before enough trials have validated (pedl.importance)."""
        response = self._get()
        ranked = importance.experiment_importance(response.experiment, response.trials)
        return {i.name: i.importance for i in ranked}

    def reload(self) -> None:
        """Properties are read afresh on every access; this only checks the experiment still exists."""
        self._get()

    # -- trials --------------------------------------------------------------------------------

    def trials(self) -> list[Trial]:
        response = self._get()
        space = records.hparam_space(response.experiment)
        return [Trial.of(t, space, self._session) for t in sorted(response.trials, key=lambda t: t.id)]

    def list_trials(
        self, sort_by: Any = None, order_by: Any = None, limit: int | None = None
    ) -> Iterator[Trial]:
        """Its trials, by id unless `sort_by` (a TrialSortBy) and `order_by` (an OrderBy) say otherwise."""
        trials = self.trials()
        if sort_by is not None:
            key = str(getattr(sort_by, "value", sort_by))
            descending = str(getattr(order_by, "value", order_by or "ASC")).upper() in ("DESC", "DESCENDING")
            missing = [t for t in trials if getattr(t, key, None) is None]
            present = [t for t in trials if getattr(t, key, None) is not None]
            trials = sorted(present, key=lambda t: (getattr(t, key), t.id), reverse=descending) + missing
        elif str(getattr(order_by, "value", order_by or "ASC")).upper() in ("DESC", "DESCENDING"):
            trials.reverse()
        yield from trials[:limit] if limit is not None else trials

    def get_trials(self, sort_by: Any = None, order_by: Any = None) -> list[Trial]:
        return list(self.list_trials(sort_by, order_by))

    def await_first_trial(self, interval: float = 0.1) -> Trial:
        """Blocks until the experiment has a trial and returns the first."""
        while True:
            trials = self.trials()
            if trials:
                return trials[0]
            if self.state in _TERMINAL:
                raise ClientError(f"experiment {self.id} ended {self.state} without a trial")
            time.sleep(interval)

    # -- checkpoints ---------------------------------------------------------------------------

    def _all_checkpoints(self) -> list[Checkpoint]:
        """Every trial's checkpoints, read in pages of trials."""
        out: list[Checkpoint] = []
        after = 0
        while True:
            request = scheduler_pb2.ListTrialDetailsRequest(experiment_id=self.id, after_trial_id=after)
            page = self._session.call("ListTrialDetails", request, f"experiment {self.id}")
            for detail in page.trials:
                out.extend(checkpoints_of(detail, self._session))
            after = page.next_after_trial_id
            if not after:
                return out

    def _searcher(self) -> tuple[str, bool]:
        experiment = self._get().experiment
        return experiment.searcher_metric, experiment.smaller_is_better

    def list_checkpoints(
        self, sort_by: Any = None, order_by: Any = None, max_results: int | None = None
    ) -> list[Checkpoint]:
        """Its checkpoints, best searcher metric first unless `sort_by`/`order_by` say otherwise."""
        metric, smaller = self._searcher()
        ordered = sorted_checkpoints(self._all_checkpoints(), sort_by, order_by, metric, smaller)
        return ordered[:max_results] if max_results is not None else ordered

    def top_checkpoint(self, sort_by: str | None = None, smaller_is_better: bool | None = None) -> Checkpoint:
        """The checkpoint with the best `sort_by` validation metric (default: the searcher's)."""
        best = self.top_n_checkpoints(1, sort_by, smaller_is_better)
        return best[0]

    def top_n_checkpoints(
        self, limit: int, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> list[Checkpoint]:
        """Up to `limit` completed checkpoints, best `sort_by` metric (default: the searcher's) first."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        metric, smaller = self._searcher()
        name = sort_by or metric
        if not name:
            raise ClientError(f"experiment {self.id} has no searcher metric to rank checkpoints by")
        candidates = self._all_checkpoints()
        ranked = ranked_checkpoints(
            candidates, name, smaller if smaller_is_better is None else smaller_is_better
        )
        if not ranked:
            raise ClientError(
                f"experiment {self.id} has no checkpoint taken at a validation of {name!r} "
                f"({len(candidates)} checkpoint(s) in all)"
            )
        return ranked[:limit]

    def top_checkpoints(self, n: int) -> list[Checkpoint]:
        """Up to `n` completed checkpoints, best searcher metric first (pedl's name for top_n_checkpoints)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        metric, smaller = self._searcher()
        if not metric:
            raise ClientError(f"experiment {self.id} has no searcher metric to rank checkpoints by")
        return ranked_checkpoints(self._all_checkpoints(), metric, smaller)[:n]

    def metrics(self, kind: str | None = None, from_batches: int = 0) -> _metrics.Metrics:
        """Every trial's stored training steps and validations (`kind` for one of them), from
        `from_batches` batches on, in one stream; `.to_pandas()` makes a DataFrame."""
        request = _metrics.request(experiment_id=self.id, kind=kind, from_batches=from_batches)
        return _metrics.collect(self._session.stream("GetMetrics", request, f"experiment {self.id}"))

    # -- what it does --------------------------------------------------------------------------

    def kill(self) -> str:
        """Ends the experiment CANCELED (owner or admin); returns its state."""
        return self._act("KillExperiment", scheduler_pb2.KillExperimentRequest(experiment_id=self.id))

    cancel = kill

    def pause(self) -> str:
        """Checkpoints and stops its trials until `activate()` (owner or admin); returns its state."""
        return self._act("PauseExperiment", scheduler_pb2.PauseExperimentRequest(experiment_id=self.id))

    def activate(self) -> str:
        """Resumes a paused experiment (owner or admin); returns its state."""
        return self._act("ActivateExperiment", scheduler_pb2.ActivateExperimentRequest(experiment_id=self.id))

    def _act(self, method: str, request: Any) -> ExperimentState:
        reply = self._session.call(method, request, f"experiment {self.id}")
        return state_of(ExperimentState, records.experiment_state(reply.experiment.state))

    def _patch(self, **fields: Any) -> None:
        request = scheduler_pb2.PatchExperimentRequest(experiment_id=self.id, **fields)
        self._session.call("PatchExperiment", request, f"experiment {self.id}")

    def set_name(self, name: str) -> None:
        self._patch(name=name)

    def set_description(self, description: str) -> None:
        self._patch(description=description)

    def set_notes(self, notes: str) -> None:
        """Replaces the experiment's notes ("" clears them); only its owner or an admin may."""
        self._patch(notes=notes)

    def add_label(self, label: str) -> None:
        self._patch(add_labels=[label])

    def remove_label(self, label: str) -> None:
        self._patch(remove_labels=[label])

    def archive(self) -> None:
        self._patch(archived=True)

    def unarchive(self) -> None:
        self._patch(archived=False)

    def delete(self) -> None:
        """Deletes an ended experiment with its results, logs and checkpoints (owner or admin)."""
        request = scheduler_pb2.DeleteExperimentRequest(experiment_id=self.id)
        self._session.call("DeleteExperiment", request, f"experiment {self.id}")

    def download_code(self, output_dir: str) -> str:
        """Writes its model definition files into `output_dir` (absent or empty); returns it."""
        from pedl.context import unpack

        request = scheduler_pb2.GetModelDefinitionRequest(experiment_id=self.id)
        response = self._session.call("GetModelDefinition", request, f"experiment {self.id}")
        target = Path(output_dir)
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise ClientError(f"{target} exists and is not an empty directory")
        target.mkdir(parents=True, exist_ok=True)
        unpack(response.model_definition, target)
        return str(target)

    def wait(self, timeout: float | None = None, *, interval: float = POLL_SECONDS) -> ExperimentState:
        """Blocks until the experiment ends; returns COMPLETED, ERROR or CANCELED."""
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {timeout}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            state = self.state
            if state in _TERMINAL:
                return state
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"experiment {self.id} is still {state} after {timeout} s")
            left = interval if deadline is None else deadline - time.monotonic()
            self._wait_once(max(0.0, min(interval, left)))

    def _wait_once(self, seconds: float) -> None:
        """Up to `seconds`, returning early the moment the experiment ends (WaitExperiment); an older
        scheduler without that call: a sleep."""
        request = scheduler_pb2.WaitExperimentRequest(experiment_id=self.id, timeout_seconds=seconds)
        try:
            self._session.stub.WaitExperiment(request, timeout=seconds + 30.0)
            return
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise self._session.error(e, f"experiment {self.id}") from None
        time.sleep(seconds)


def _positive_id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
        raise ValueError(f"{what} must be a positive integer up to 2147483647, got {value!r}")
    return value


def get_experiment(experiment_id: int, master: str | None = None) -> ExperimentClient:
    """A handle on experiment `experiment_id`; fails at once if the scheduler does not know it."""
    _positive_id(experiment_id, "experiment_id")
    session = Session(resolve_master(master))
    client = ExperimentClient(experiment_id, session)
    try:
        client._get()
    except BaseException:
        session.close()
        raise
    return client


def get_trial(trial_id: int, master: str | None = None) -> Trial:
    """One trial by id."""
    _positive_id(trial_id, "trial_id")
    session = Session(resolve_master(master))
    try:
        detail = session.call(
            "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=trial_id), f"trial {trial_id}"
        )
        request = scheduler_pb2.GetExperimentRequest(experiment_id=detail.trial.experiment_id)
        experiment = session.call("GetExperiment", request, f"trial {trial_id}").experiment
    except BaseException:
        session.close()
        raise
    return Trial.of(detail.trial, records.hparam_space(experiment), session)


def get_checkpoint(uuid: str, master: str | None = None) -> Checkpoint:
    """One checkpoint by uuid, with the validation taken at its batch."""
    return _get_checkpoint(uuid, Session(resolve_master(master)))


def list_experiments(
    name: str | None = None,
    states: list[Any] | None = None,
    users: list[str] | None = None,
    master: str | None = None,
) -> list[ExperimentClient]:
    """Every experiment (archived too), oldest first; `name`, `states` and `users` narrow it."""
    session = Session(resolve_master(master))
    wanted = {str(getattr(s, "value", s)) for s in states} if states else None
    out: list[ExperimentClient] = []
    token = ""
    while True:
        request = scheduler_pb2.ListExperimentsRequest(page_size=500, page_token=token)
        page = session.call("ListExperiments", request, "experiments")
        for e in page.experiments:
            if name is not None and e.name != name:
                continue
            if wanted is not None and records.experiment_state(e.state) not in wanted:
                continue
            if users is not None and e.owner not in users:
                continue
            out.append(ExperimentClient(e.id, session))
        token = page.next_page_token
        if not token:
            return out
