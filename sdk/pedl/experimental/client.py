"""Reading a cluster's experiments from Python: trials, the best checkpoint, downloading it.

    exp = get_experiment(7)
    exp.wait()
    path = exp.top_checkpoint().download()
    trial = pedl.pytorch.load_trial_from_checkpoint_path(path)

Every failure the cluster reports (unknown id, unreachable scheduler) is a ClientError; a failed
download raises the checkpoint store client's CheckpointError.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from pedl import _grpc, records
from pedl._metrics import from_struct
from pedl.checkpoints import CheckpointStoreClient
from pedl.client import ClientError, resolve_master
from pedl.experimental import metrics as _metrics
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc

__all__ = ["Checkpoint", "ClientError", "ExperimentClient", "Trial", "get_experiment", "resolve_master"]

POLL_SECONDS = 0.5
_TIMEOUT = 30.0
_STREAM_TIMEOUT = 600.0
_TERMINAL = frozenset({"COMPLETED", "ERROR", "CANCELED"})


class _Session:
    """One scheduler channel plus the store address, looked up once on first download."""

    def __init__(self, master: str) -> None:
        self.master = master
        self._channel = _grpc.channel(master)
        self.stub = scheduler_pb2_grpc.SchedulerServiceStub(self._channel)
        self._store_address: str | None = None

    def call(self, method: str, request: Any, what: str) -> Any:
        try:
            return getattr(self.stub, method)(request, timeout=_TIMEOUT)
        except grpc.RpcError as e:
            raise self._error(e, what) from None

    def store_address(self) -> str:
        if self._store_address is None:
            info = self.call("GetClusterInfo", scheduler_pb2.GetClusterInfoRequest(), "cluster info")
            if not info.checkpoint_store_address:
                raise ClientError(f"the scheduler at {self.master} names no checkpoint store")
            self._store_address = info.checkpoint_store_address
        return self._store_address

    def stream(self, method: str, request: Any, what: str) -> list[Any]:
        """A server stream read to its end, with `call`'s errors."""
        try:
            return list(getattr(self.stub, method)(request, timeout=_STREAM_TIMEOUT))
        except grpc.RpcError as e:
            raise self._error(e, what) from None

    def _error(self, e: grpc.RpcError, what: str) -> ClientError:
        code = e.code()
        details = e.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE:
            return ClientError(f"cannot reach the pedl scheduler at {self.master}: {details}")
        if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED):
            return ClientError(details or f"{what}: {code.name}")
        return ClientError(f"{what} at {self.master} failed ({code.name}): {details}")

    def close(self) -> None:
        self._channel.close()


@dataclass
class Checkpoint:
    uuid: str
    experiment_id: int
    trial_id: int
    total_batches: int
    state: str
    size: int
    # The validation taken at this checkpoint's batch count; None when there was none.
    validation_metrics: dict[str, Any] | None
    _session: _Session = field(repr=False, compare=False)

    def download(self, path: str | os.PathLike[str] | None = None) -> str:
        """Downloads into `path` (absent or empty), returning it as an absolute path.

        Without a path the target is ./checkpoints/<uuid>; a complete earlier download there is
        reused (downloads are all-or-nothing, so a non-empty directory is a whole checkpoint).
        """
        target = Path(path) if path is not None else Path("checkpoints") / self.uuid
        target = target.absolute()
        if path is None and target.is_dir() and any(target.iterdir()):
            return str(target)
        with CheckpointStoreClient(self._session.store_address()) as store:
            store.download(self.uuid, target)
        return str(target)


@dataclass
class Trial:
    id: int
    experiment_id: int
    state: str
    hparams: dict[str, Any]
    total_batches: int
    best_validation_metric: float | None
    _session: _Session = field(repr=False, compare=False)

    def checkpoints(self) -> list[Checkpoint]:
        """The trial's stored checkpoints, oldest first, each with the validation at its batch count."""
        detail = self._session.call(
            "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=self.id), f"trial {self.id}"
        )
        return _checkpoints_of(detail, self._session)

    def metrics(self, kind: str | None = None, from_batches: int = 0) -> _metrics.Metrics:
        """Its stored training steps and validations (`kind` "training" or "validation" for one),
        from `from_batches` batches on, oldest first; `.to_pandas()` makes a DataFrame."""
        request = _metrics.request(trial_id=self.id, kind=kind, from_batches=from_batches)
        return _metrics.collect(self._session.stream("GetMetrics", request, f"trial {self.id}"))


def _checkpoints_of(detail: scheduler_pb2.GetTrialResponse, session: _Session) -> list[Checkpoint]:
    validations = {v.total_batches: from_struct(v.metrics) for v in detail.validations}
    return [
        Checkpoint(
            uuid=c.uuid,
            experiment_id=c.experiment_id or detail.trial.experiment_id,
            trial_id=c.trial_id or detail.trial.id,
            total_batches=c.total_batches,
            state=records.checkpoint_state(c.state),
            size=c.total_size or sum(f.size for f in c.files),
            validation_metrics=validations.get(c.total_batches),
            _session=session,
        )
        for c in sorted(detail.checkpoints, key=lambda c: (c.total_batches, c.uuid))
    ]


def _best_checkpoint(
    checkpoints: Sequence[Checkpoint], metric: str, smaller_is_better: bool
) -> Checkpoint | None:
    """Best completed checkpoint by `metric`; ties go to the more-trained one, then the lower trial id."""
    ranked = _ranked_checkpoints(checkpoints, metric, smaller_is_better)
    return ranked[0] if ranked else None


def _ranked_checkpoints(
    checkpoints: Sequence[Checkpoint], metric: str, smaller_is_better: bool
) -> list[Checkpoint]:
    """Completed checkpoints with a value of `metric`, best first (ties as `_best_checkpoint`)."""
    sign = 1.0 if smaller_is_better else -1.0
    scores: dict[str, float] = {}
    for c in checkpoints:
        value = (c.validation_metrics or {}).get(metric)
        if c.state == "COMPLETED" and isinstance(value, (int, float)) and not isinstance(value, bool):
            scores[c.uuid] = sign * float(value)
    ranked = [c for c in checkpoints if c.uuid in scores]
    return sorted(ranked, key=lambda c: (scores[c.uuid], -c.total_batches, c.trial_id, c.uuid))


class ExperimentClient:
    """An experiment on the cluster; every property and method asks the scheduler afresh."""

    def __init__(self, experiment_id: int, session: _Session) -> None:
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

    @property
    def state(self) -> str:
        """ACTIVE, PAUSED, COMPLETED, ERROR or CANCELED."""
        return records.experiment_state(self._get().experiment.state)

    def trials(self) -> list[Trial]:
        response = self._get()
        space = records.stored_config(response.experiment.config_yaml).get("hyperparameters")
        return [
            Trial(
                id=t.id,
                experiment_id=t.experiment_id,
                state=records.trial_state(t.state),
                hparams=records.typed_hparams(from_struct(t.hparams), space),
                total_batches=t.total_batches,
                best_validation_metric=(
                    t.best_validation_metric if t.HasField("best_validation_metric") else None
                ),
                _session=self._session,
            )
            for t in sorted(response.trials, key=lambda t: t.id)
        ]

    def top_checkpoint(self) -> Checkpoint:
        """The checkpoint with the best searcher metric across the experiment."""
        response = self._get()
        metric = response.experiment.searcher_metric
        if not metric:
            raise ClientError(f"experiment {self.id} has no searcher metric to rank checkpoints by")
        candidates: list[Checkpoint] = []
        for trial in response.trials:
            detail = self._session.call(
                "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=trial.id), f"trial {trial.id}"
            )
            candidates.extend(_checkpoints_of(detail, self._session))
        best = _best_checkpoint(candidates, metric, response.experiment.smaller_is_better)
        if best is None:
            raise ClientError(
                f"experiment {self.id} has no checkpoint taken at a validation of {metric!r} "
                f"({len(candidates)} checkpoint(s) in all)"
            )
        return best

    def top_checkpoints(self, n: int) -> list[Checkpoint]:
        """Up to `n` completed checkpoints, best searcher metric first (read in pages of trials)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        experiment = self._get().experiment
        if not experiment.searcher_metric:
            raise ClientError(f"experiment {self.id} has no searcher metric to rank checkpoints by")
        candidates: list[Checkpoint] = []
        after = 0
        while True:
            request = scheduler_pb2.ListTrialDetailsRequest(experiment_id=self.id, after_trial_id=after)
            page = self._session.call("ListTrialDetails", request, f"experiment {self.id}")
            for detail in page.trials:
                candidates.extend(_checkpoints_of(detail, self._session))
            after = page.next_after_trial_id
            if not after:
                break
        ranked = _ranked_checkpoints(candidates, experiment.searcher_metric, experiment.smaller_is_better)
        return ranked[:n]

    def metrics(self, kind: str | None = None, from_batches: int = 0) -> _metrics.Metrics:
        """Every trial's stored training steps and validations (`kind` for one of them), from
        `from_batches` batches on, in one stream; `.to_pandas()` makes a DataFrame."""
        request = _metrics.request(experiment_id=self.id, kind=kind, from_batches=from_batches)
        return _metrics.collect(self._session.stream("GetMetrics", request, f"experiment {self.id}"))

    def kill(self) -> str:
        """Ends the experiment CANCELED (owner or admin); returns its state."""
        return self._act("KillExperiment", scheduler_pb2.KillExperimentRequest(experiment_id=self.id))

    def pause(self) -> str:
        """Checkpoints and stops its trials until `activate()` (owner or admin); returns its state."""
        return self._act("PauseExperiment", scheduler_pb2.PauseExperimentRequest(experiment_id=self.id))

    def activate(self) -> str:
        """Resumes a paused experiment (owner or admin); returns its state."""
        return self._act("ActivateExperiment", scheduler_pb2.ActivateExperimentRequest(experiment_id=self.id))

    def _act(self, method: str, request: Any) -> str:
        reply = self._session.call(method, request, f"experiment {self.id}")
        return records.experiment_state(reply.experiment.state)

    def wait(self, timeout: float | None = None) -> str:
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
            left = POLL_SECONDS if deadline is None else deadline - time.monotonic()
            time.sleep(max(0.0, min(POLL_SECONDS, left)))


def get_experiment(experiment_id: int, master: str | None = None) -> ExperimentClient:
    """A handle on experiment `experiment_id`; fails at once if the scheduler does not know it."""
    valid = isinstance(experiment_id, int) and not isinstance(experiment_id, bool)
    if not valid or not 1 <= experiment_id < 2**31:
        raise ValueError(f"experiment_id must be a positive integer up to 2147483647, got {experiment_id!r}")
    session = _Session(resolve_master(master))
    client = ExperimentClient(experiment_id, session)
    try:
        client._get()
    except BaseException:
        session.close()
        raise
    return client
