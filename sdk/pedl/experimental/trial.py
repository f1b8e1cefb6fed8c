"""A trial as the Python client shows it, with Determined's `Trial` surface: its metrics
(`iter_metrics`), log (`logs`), checkpoints (`list_checkpoints`, `top_checkpoint`,
`select_checkpoint`), `kill()` and `reload()`."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pedl import records
from pedl._metrics import check_group, from_struct
from pedl.experimental import metrics as _metrics
from pedl.experimental._session import ClientError, Session
from pedl.experimental.checkpoint import Checkpoint, checkpoints_of, ranked_checkpoints, sorted_checkpoints
from pedl.experimental.states import TrialState, state_of
from pedl.v1 import scheduler_pb2


@dataclass(frozen=True)
class TrialMetrics:
    """One reported step or validation, as Determined's `TrialMetrics`."""

    trial_id: int
    trial_run_id: int
    steps_completed: int
    end_time: datetime | None
    metrics: dict[str, Any]
    group: str
    batch_metrics: list[dict[str, Any]] | None = None

    @property
    def total_batches(self) -> int:  # Determined's older TrainingMetrics/ValidationMetrics field
        return self.steps_completed


@dataclass
class Trial:
    id: int
    experiment_id: int
    state: TrialState
    hparams: dict[str, Any]
    total_batches: int
    best_validation_metric: float | None
    _session: Session = field(repr=False, compare=False)

    @classmethod
    def of(cls, t: scheduler_pb2.Trial, space: Any, session: Session) -> Trial:
        return cls(
            id=t.id,
            experiment_id=t.experiment_id,
            state=state_of(TrialState, records.trial_state(t.state)),
            hparams=records.typed_hparams(from_struct(t.hparams), space),
            total_batches=t.total_batches,
            best_validation_metric=t.best_validation_metric if t.HasField("best_validation_metric") else None,
            _session=session,
        )

    def _detail(self) -> scheduler_pb2.GetTrialResponse:
        request = scheduler_pb2.GetTrialRequest(trial_id=self.id)
        return self._session.call("GetTrial", request, f"trial {self.id}")

    def reload(self) -> None:
        """Reads its state, batches and best validation afresh."""
        t = self._detail().trial
        self.state = state_of(TrialState, records.trial_state(t.state))
        self.total_batches = t.total_batches
        self.best_validation_metric = (
            t.best_validation_metric if t.HasField("best_validation_metric") else None
        )

    def kill(self) -> None:
        """Stops this trial (owner or admin); its experiment goes on."""
        self._session.call("KillTrial", scheduler_pb2.KillTrialRequest(trial_id=self.id), f"trial {self.id}")

    # -- metrics -------------------------------------------------------------------------------

    def metrics(self, kind: str | None = None, from_batches: int = 0) -> _metrics.Metrics:
        """Its stored training steps and validations (`kind` "training" or "validation" for one),
        from `from_batches` batches on, oldest first; `.to_pandas()` makes a DataFrame."""
        request = _metrics.request(trial_id=self.id, kind=kind, from_batches=from_batches)
        return _metrics.collect(self._session.stream("GetMetrics", request, f"trial {self.id}"))

    def iter_metrics(self, group: str) -> Iterator[TrialMetrics]:
        """Its reported metrics of one group ("training", "validation" or a custom group a script
        reported with `report_metrics(group=...)`), oldest first."""
        check_group(group)
        for record in self.metrics(kind=group):
            yield TrialMetrics(
                trial_id=self.id,
                trial_run_id=0,
                steps_completed=record["total_batches"],
                end_time=_time(record["end_time"]),
                metrics=record["metrics"],
                group=group,
            )

    def stream_training_metrics(self) -> Iterator[TrialMetrics]:
        return self.iter_metrics("training")

    def stream_validation_metrics(self) -> Iterator[TrialMetrics]:
        return self.iter_metrics("validation")

    @property
    def summary_metrics(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per group and metric: count, last, min, max and mean of its numeric values."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for record in self.metrics():
            group = out.setdefault(record["kind"], {})
            for name, value in record["metrics"].items():
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                s = group.setdefault(name, {"count": 0, "sum": 0.0, "min": value, "max": value})
                s.update(count=s["count"] + 1, sum=s["sum"] + value, last=value)
                s.update(min=min(s["min"], value), max=max(s["max"], value))
        for group in out.values():
            for s in group.values():
                s["mean"] = s.pop("sum") / s["count"]
        return out

    # -- logs ----------------------------------------------------------------------------------

    def logs(
        self,
        follow: bool = False,
        *,
        head: int | None = None,
        tail: int | None = None,
        stdtypes: list[str] | None = None,
        system: bool = False,
        **filters: Any,
    ) -> Iterator[str]:
        """Its log lines as written (with `follow`, until the trial ends). pedl's own lines only with
        `system=True`; `stdtypes` picks "stdout" and/or "stderr"."""
        unknown = [name for name in filters if filters[name] is not None]
        if unknown:
            answerable = "follow, head, tail, stdtypes, system"
            raise TypeError(
                f"Trial.logs(): pedl's logs cannot filter by {', '.join(unknown)} (it takes {answerable})"
            )
        if head is not None and tail is not None:
            raise ValueError("Trial.logs(): give head or tail, not both")
        if tail is not None and not follow:  # the last `tail` of the lines shown, not of all stored
            yield from deque(self.logs(stdtypes=stdtypes, system=system), maxlen=tail)
            return
        request = scheduler_pb2.GetTrialLogsRequest(trial_id=self.id, follow=follow, tail=tail or 0)
        count = 0
        for response in self._session.iterate("GetTrialLogs", request, f"logs of trial {self.id}"):
            for line in response.lines:
                if not system and records.is_system_line(line.source, line.message):
                    continue
                if stdtypes is not None and line.source not in stdtypes:
                    continue
                if head is not None and count >= head:
                    return
                count += 1
                yield line.message

    # -- checkpoints ---------------------------------------------------------------------------

    def _searcher(self) -> tuple[str, bool]:
        request = scheduler_pb2.GetExperimentRequest(experiment_id=self.experiment_id)
        experiment = self._session.call(
            "GetExperiment", request, f"experiment {self.experiment_id}"
        ).experiment
        return experiment.searcher_metric, experiment.smaller_is_better

    def checkpoints(self) -> list[Checkpoint]:
        """The trial's stored checkpoints, oldest first, each with the validation at its batch count."""
        return checkpoints_of(self._detail(), self._session)

    def list_checkpoints(
        self, sort_by: Any = None, order_by: Any = None, max_results: int | None = None
    ) -> list[Checkpoint]:
        """Its checkpoints, best searcher metric first unless `sort_by`/`order_by` say otherwise."""
        metric, smaller = self._searcher()
        ordered = sorted_checkpoints(self.checkpoints(), sort_by, order_by, metric, smaller)
        return ordered[:max_results] if max_results is not None else ordered

    get_checkpoints = list_checkpoints

    def top_checkpoint(self, sort_by: str | None = None, smaller_is_better: bool | None = None) -> Checkpoint:
        """Its checkpoint with the best `sort_by` validation metric (default: the searcher's)."""
        return self.select_checkpoint(best=True, sort_by=sort_by, smaller_is_better=smaller_is_better)

    def select_checkpoint(
        self,
        latest: bool = False,
        best: bool = False,
        uuid: str | None = None,
        sort_by: str | None = None,
        smaller_is_better: bool | None = None,
    ) -> Checkpoint:
        """Exactly one of: the `latest` checkpoint, the `best` by `sort_by` (default: the searcher
        metric), or the one with `uuid`."""
        if sum((latest, best, uuid is not None)) != 1:
            raise ValueError("select_checkpoint(): give exactly one of latest=True, best=True or uuid=")
        checkpoints = [c for c in self.checkpoints() if c.state == "COMPLETED"]
        chosen: Checkpoint | None
        if uuid is not None:
            chosen = next((c for c in checkpoints if c.uuid == uuid), None)
            what = f"checkpoint {uuid}"
        elif latest:
            chosen = max(checkpoints, key=lambda c: c.total_batches, default=None)
            what = "completed checkpoint"
        else:
            metric, smaller = self._searcher()
            name = sort_by or metric
            smaller = smaller if smaller_is_better is None else smaller_is_better
            ranked = ranked_checkpoints(checkpoints, name, smaller)
            chosen = ranked[0] if ranked else None
            what = f"checkpoint taken at a validation of {name!r}"
        if chosen is None:
            raise ClientError(f"trial {self.id} has no {what}")
        return chosen


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
