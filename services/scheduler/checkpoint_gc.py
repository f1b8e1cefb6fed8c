"""Which checkpoints an experiment may delete under its checkpoint_storage save_* policy.

Determined's semantics: each trial keeps its `save_trial_latest` most recent checkpoints and its
`save_trial_best` checkpoints with the best searcher metric; the experiment as a whole keeps its
`save_experiment_best` best. A checkpoint's metric is the validation taken at the same batch
count; one without such a validation can never count as "best". On top of the policy, the
latest checkpoint of a live trial (it may restart from it) and any protected uuid (e.g. a PBT
parent about to be copied) are never deleted. Pure logic: the caller reads rows and deletes.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SAVE_DEFAULTS = {"save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}


@dataclass(frozen=True)
class CheckpointRef:
    """One COMPLETED checkpoint of the experiment."""

    uuid: str
    trial_id: int
    total_batches: int


@dataclass(frozen=True)
class GCPolicy:
    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1
    smaller_is_better: bool = True

    def __post_init__(self) -> None:
        for name in SAVE_DEFAULTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"checkpoint_storage.{name} must be an integer >= 0, got {value!r}")

    @classmethod
    def from_storage(cls, storage: Mapping[str, Any], smaller_is_better: bool) -> GCPolicy:
        """From an experiment's validated checkpoint_storage config; absent keys take the defaults."""
        counts = {name: storage.get(name, default) for name, default in SAVE_DEFAULTS.items()}
        return cls(smaller_is_better=smaller_is_better, **counts)


def checkpoints_to_delete(
    checkpoints: Iterable[CheckpointRef],
    metrics: Mapping[tuple[int, int], float],
    policy: GCPolicy,
    live_trial_ids: Collection[int] = (),
    protected: Collection[str] = (),
) -> list[str]:
    """Uuids to delete, ordered by (trial, batches, uuid).

    `checkpoints` must be ALL of the experiment's COMPLETED checkpoints (the experiment-wide best
    is only right over all of them); `metrics` maps (trial id, total batches) to the searcher
    metric of the validation at that point.
    """
    ckpts = _checked(checkpoints)
    scored = {c.uuid: _metric(metrics, c) for c in ckpts}
    keep: set[str] = set(protected)

    by_trial: dict[int, list[CheckpointRef]] = {}
    for c in ckpts:
        by_trial.setdefault(c.trial_id, []).append(c)
    for trial_id, own in by_trial.items():
        newest = sorted(own, key=_recency)
        keep.update(c.uuid for c in newest[: policy.save_trial_latest])
        if trial_id in live_trial_ids:
            keep.add(newest[0].uuid)
        keep.update(c.uuid for c in _best(own, scored, policy.smaller_is_better)[: policy.save_trial_best])
    keep.update(c.uuid for c in _best(ckpts, scored, policy.smaller_is_better)[: policy.save_experiment_best])

    doomed = [c for c in ckpts if c.uuid not in keep]
    return [c.uuid for c in sorted(doomed, key=lambda c: (c.trial_id, c.total_batches, c.uuid))]


def _checked(checkpoints: Iterable[CheckpointRef]) -> list[CheckpointRef]:
    ckpts = list(checkpoints)
    seen: set[str] = set()
    for c in ckpts:
        if not c.uuid:
            raise ValueError(f"checkpoint of trial {c.trial_id} at batch {c.total_batches} has no uuid")
        if c.uuid in seen:
            raise ValueError(f"checkpoint {c.uuid} is listed twice")
        seen.add(c.uuid)
    return ckpts


def _metric(metrics: Mapping[tuple[int, int], float], c: CheckpointRef) -> float | None:
    value = metrics.get((c.trial_id, c.total_batches))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(
            f"validation metric of trial {c.trial_id} at batch {c.total_batches} must be a finite "
            f"number, got {value!r}"
        )
    return float(value)


def _recency(c: CheckpointRef) -> tuple[int, str]:
    """Most recent first; equal batch counts (a re-run step) fall back to uuid for determinism."""
    return (-c.total_batches, c.uuid)


def _best(
    ckpts: Sequence[CheckpointRef], scored: Mapping[str, float | None], smaller_is_better: bool
) -> list[CheckpointRef]:
    """Checkpoints with a metric, best first; ties go to the more-trained one, then lower trial id."""
    sign = 1.0 if smaller_is_better else -1.0
    ranked = [c for c in ckpts if scored[c.uuid] is not None]
    return sorted(ranked, key=lambda c: (sign * scored[c.uuid], -c.total_batches, c.trial_id, c.uuid))  # type: ignore[operator]
