"""A stored checkpoint as the Python client shows it, with Determined's `Checkpoint` surface
(`uuid`, `state`, `resources`, `metadata`, `report_time`, `training`, `download()`, `delete()`), and
the ranking by a validation metric that `top_checkpoint` and `list_checkpoints` share."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from pedl import records
from pedl._metrics import from_struct
from pedl.checkpoints import CheckpointStoreClient
from pedl.experimental._session import ClientError, Session
from pedl.experimental.states import CheckpointState, state_of
from pedl.v1 import common_pb2, scheduler_pb2


@dataclass(frozen=True)
class CheckpointTrainingMetadata:
    """Determined's `Checkpoint.training`: where the checkpoint came from."""

    experiment_config: dict[str, Any]
    experiment_id: int
    trial_id: int
    hparams: dict[str, Any]
    # Determined's shape: {"avgMetrics": {...}} of the validation at the checkpoint's batch.
    validation_metrics: dict[str, Any]
    searcher_metric: float | None


@dataclass
class Checkpoint:
    uuid: str
    experiment_id: int
    trial_id: int
    total_batches: int
    state: CheckpointState
    size: int
    # The validation taken at this checkpoint's batch count; None when there was none.
    validation_metrics: dict[str, Any] | None
    _session: Session = field(repr=False, compare=False)
    # File path -> size in bytes, as Determined's `resources`.
    resources: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    report_time: str | None = None
    task_id: str | None = None
    allocation_id: str | None = None
    _training: CheckpointTrainingMetadata | None = field(default=None, repr=False, compare=False)

    @property
    def batch_number(self) -> int:
        return self.total_batches

    @property
    def training(self) -> CheckpointTrainingMetadata:
        """Its experiment's config, its trial's hyperparameters and the validation at its batch
        (asked of the scheduler once)."""
        if self._training is None:
            trial = self._session.call(
                "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=self.trial_id), f"trial {self.trial_id}"
            ).trial
            experiment = self._session.call(
                "GetExperiment",
                scheduler_pb2.GetExperimentRequest(experiment_id=self.experiment_id),
                f"experiment {self.experiment_id}",
            ).experiment
            config = records.config_mapping(experiment)
            metric = experiment.searcher_metric
            value = (self.validation_metrics or {}).get(metric)
            self._training = CheckpointTrainingMetadata(
                experiment_config=config,
                experiment_id=self.experiment_id,
                trial_id=self.trial_id,
                hparams=records.typed_hparams(from_struct(trial.hparams), config.get("hyperparameters")),
                validation_metrics={"avgMetrics": dict(self.validation_metrics or {})},
                searcher_metric=float(value) if _is_number(value) else None,
            )
        return self._training

    def download(self, path: str | os.PathLike[str] | None = None, mode: Any = None) -> str:
        """Downloads into `path` (absent or empty), returning it as an absolute path.

        Without a path the target is ./checkpoints/<uuid>; a complete earlier download there is
        reused (downloads are all-or-nothing, so a non-empty directory is a whole checkpoint).
        `mode` (Determined's DownloadMode) is accepted: pedl picks direct or streamed itself.
        """
        target = Path(path) if path is not None else Path("checkpoints") / self.uuid
        target = target.absolute()
        if path is None and target.is_dir() and any(target.iterdir()):
            return str(target)
        with CheckpointStoreClient(self._session.store_address()) as store:
            store.download(self.uuid, target)
        return str(target)

    def write_metadata_file(self, path: str | os.PathLike[str]) -> None:
        """Writes the checkpoint's metadata as JSON, as Determined's method does."""
        Path(path).write_text(json.dumps(self.metadata, indent=2, sort_keys=True) + "\n")

    def delete(self) -> None:
        """Deletes the checkpoint (its owner or an admin); refused while a trial still needs it."""
        request = scheduler_pb2.DeleteCheckpointsRequest(checkpoint_uuids=[self.uuid])
        self._session.call("DeleteCheckpoints", request, f"checkpoint {self.uuid}")
        self.state = CheckpointState.DELETED

    def remove_files(self, globs: list[str]) -> None:
        """Removes the checkpoint's files any glob names (`*`, `?`, `[...]` within a path segment,
        `**` across them; a folder names all in it), as Determined's method does: the checkpoint
        becomes PARTIALLY_DELETED, or DELETED once no file is left. No globs: nothing is removed."""
        request = scheduler_pb2.SchedulerServiceRemoveCheckpointFilesRequest(
            checkpoint_uuids=[self.uuid], globs=list(globs)
        )
        self._session.call("RemoveCheckpointFiles", request, f"checkpoint {self.uuid}")
        self.reload()

    def reload(self) -> None:
        fresh = get_checkpoint(self.uuid, self._session)
        for name in ("state", "size", "resources", "metadata", "report_time", "validation_metrics"):
            setattr(self, name, getattr(fresh, name))

    def add_metadata(self, metadata: dict[str, Any]) -> None:
        """Adds (or replaces) top-level keys of the checkpoint's metadata, kept by the scheduler
        (its owner or an admin); as in Determined, the files in storage are left as they were."""
        self._set_metadata({**self.metadata, **metadata})

    def remove_metadata(self, keys: list[str]) -> None:
        """Removes these top-level keys from the checkpoint's metadata (see `add_metadata`)."""
        self._set_metadata({k: v for k, v in self.metadata.items() if k not in set(keys)})

    def _set_metadata(self, metadata: dict[str, Any]) -> None:
        try:
            text = json.dumps(metadata, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ClientError(f"checkpoint metadata must be JSON: {e}") from None
        request = scheduler_pb2.SetCheckpointMetadataRequest(checkpoint_uuid=self.uuid, metadata_json=text)
        self._session.call("SetCheckpointMetadata", request, f"checkpoint {self.uuid}")
        self.metadata = metadata


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def make_checkpoint(
    c: common_pb2.Checkpoint, validations: dict[int, dict[str, Any]], session: Session, trial: Any = None
) -> Checkpoint:
    return Checkpoint(
        uuid=c.uuid,
        experiment_id=c.experiment_id or (trial.experiment_id if trial is not None else 0),
        trial_id=c.trial_id or (trial.id if trial is not None else 0),
        total_batches=c.total_batches,
        state=state_of(CheckpointState, records.checkpoint_state(c.state)),
        size=c.total_size or sum(f.size for f in c.files),
        validation_metrics=validations.get(c.total_batches),
        _session=session,
        resources={f.path: f.size for f in c.files},
        metadata=json.loads(c.user_metadata_json) if c.user_metadata_json else dict(c.metadata),
        report_time=c.created_at or None,
    )


def checkpoints_of(detail: scheduler_pb2.GetTrialResponse, session: Session) -> list[Checkpoint]:
    """A trial's stored checkpoints, oldest first, each with the validation at its batch count."""
    validations = {v.total_batches: from_struct(v.metrics) for v in detail.validations}
    ordered = sorted(detail.checkpoints, key=lambda c: (c.total_batches, c.uuid))
    return [make_checkpoint(c, validations, session, detail.trial) for c in ordered]


def get_checkpoint(uuid: str, session: Session) -> Checkpoint:
    """One checkpoint by uuid: the store's record, with the scheduler's validation at its batch."""
    from pedl.checkpoints import CheckpointError, CheckpointNotFound

    try:
        with CheckpointStoreClient(session.store_address()) as store:
            record = store.get(uuid)
    except CheckpointNotFound:
        raise ClientError(f"checkpoint {uuid} not found") from None
    except CheckpointError as e:
        raise ClientError(str(e)) from None
    detail = session.call(
        "GetTrial", scheduler_pb2.GetTrialRequest(trial_id=record.trial_id), f"trial {record.trial_id}"
    )
    validations = {v.total_batches: from_struct(v.metrics) for v in detail.validations}
    recorded = {c.uuid: c for c in detail.checkpoints}.get(uuid)
    if recorded is not None:  # the user's metadata is the scheduler's, not the store's
        record.user_metadata_json = recorded.user_metadata_json
    return make_checkpoint(record, validations, session, detail.trial)


def ranked_checkpoints(
    checkpoints: Sequence[Checkpoint], metric: str, smaller_is_better: bool
) -> list[Checkpoint]:
    """Completed checkpoints with a value of `metric`, best first; ties go to the more-trained one,
    then the lower trial id."""
    sign = 1.0 if smaller_is_better else -1.0
    scores: dict[str, float] = {}
    for c in checkpoints:
        value = (c.validation_metrics or {}).get(metric)
        if c.state == CheckpointState.COMPLETED and _is_number(value):
            scores[c.uuid] = sign * float(value)
    ranked = [c for c in checkpoints if c.uuid in scores]
    return sorted(ranked, key=lambda c: (scores[c.uuid], -c.total_batches, c.trial_id, c.uuid))


_FIELDS = ("uuid", "trial_id", "total_batches", "report_time", "state")


def sorted_checkpoints(
    checkpoints: Sequence[Checkpoint], sort_by: Any, order_by: Any, metric: str, smaller_is_better: bool
) -> list[Checkpoint]:
    """Determined's `list_checkpoints` order. Neither given: best searcher metric first. Otherwise both:
    a field (CheckpointSortBy) or a validation metric's name, ASC or DESC. Checkpoints without the
    metric come last."""
    if (sort_by is None) != (order_by is None):
        raise ValueError("sort_by and order_by go together: give both or neither")
    if sort_by is None:
        ranked = ranked_checkpoints(checkpoints, metric, smaller_is_better)
    else:
        key = str(getattr(sort_by, "value", sort_by))
        descending = str(getattr(order_by, "value", order_by)).upper() in ("DESC", "DESCENDING")
        if key in _FIELDS:
            return sorted(checkpoints, key=lambda c: (_field(c, key), c.uuid), reverse=descending)
        name = metric if key == "searcher_metric" else key
        ranked = ranked_checkpoints(checkpoints, name, smaller_is_better=not descending)
    return ranked + [c for c in checkpoints if c not in ranked]


def _field(c: Checkpoint, key: str) -> Any:
    value = getattr(c, key)
    return value if isinstance(value, int) else str(value or "")
