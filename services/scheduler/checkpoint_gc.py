"""Which checkpoints an experiment may delete under its checkpoint_storage save_* policy.

Determined's semantics: each trial keeps its `save_trial_latest` most recent checkpoints and its
`save_trial_best` checkpoints with the best searcher metric; the experiment as a whole keeps its
`save_experiment_best` best. A checkpoint's metric is the validation taken at the same batch
count; one without such a validation can never count as "best". On top of the policy, the
latest checkpoint of a live trial (it may restart from it) and any protected uuid (e.g. a PBT
parent about to be copied) are never deleted. Pure logic: the caller reads rows and deletes.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pedl.config.storage_settings import CheckpointStorage

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
        """From a checkpoint_storage mapping; absent keys take the defaults."""
        return cls.of(CheckpointStorage.of(storage), smaller_is_better)

    @classmethod
    def of(cls, storage: CheckpointStorage, smaller_is_better: bool) -> GCPolicy:
        """From an experiment's typed checkpoint_storage section."""
        return cls(
            save_experiment_best=storage.save_experiment_best,
            save_trial_best=storage.save_trial_best,
            save_trial_latest=storage.save_trial_latest,
            smaller_is_better=smaller_is_better,
        )


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
    ranked = [(c, score) for c in ckpts if (score := scored[c.uuid]) is not None]
    ranked.sort(key=lambda cs: (sign * cs[1], -cs[0].total_batches, cs[0].trial_id, cs[0].uuid))
    return [c for c, _ in ranked]


class CheckpointLedger:
    """One experiment's COMPLETED checkpoints and searcher metrics, kept between collections.

    `checkpoints_to_delete` over every checkpoint at every trial end would cost time in the number
    of trials the experiment ever ran (quadratic over a large search). A collection here re-decides
    only the trials whose verdict can have changed since the last one: those with a new checkpoint
    or metric, those whose liveness or protection changed, and those holding the experiment's best
    then or now. Every other trial's checkpoints, metrics and status are unchanged, so its verdict
    stands, and the result equals a full collection.
    """

    def __init__(self, policy: GCPolicy) -> None:
        self.policy = policy
        self._by_trial: dict[int, dict[str, CheckpointRef]] = {}
        self._owner: dict[str, int] = {}
        self._metrics: dict[tuple[int, int], float] = {}
        # The experiment's scored checkpoints, best first (only kept when save_experiment_best > 0).
        self._ranked: list[tuple[tuple[float, int, int, str], CheckpointRef]] = []
        self._keys: dict[str, tuple[float, int, int, str]] = {}  # uuid -> its place in _ranked
        self._changed: set[int] = set()
        self._best: set[int] = set()  # trials holding the experiment's best at the last collection
        self._live: frozenset[int] = frozenset()
        self._protected: frozenset[str] = frozenset()
        # Handed to the deleter but not confirmed: offered again at every collection.
        self._doomed: dict[str, CheckpointRef] = {}

    def add_checkpoint(self, ref: CheckpointRef) -> None:
        if ref.uuid in self._owner or ref.uuid in self._doomed:
            return
        self._by_trial.setdefault(ref.trial_id, {})[ref.uuid] = ref
        self._owner[ref.uuid] = ref.trial_id
        self._changed.add(ref.trial_id)
        self._rank(ref)

    def add_metric(self, trial_id: int, total_batches: int, value: Any) -> None:
        """The searcher metric of the validation at that point; the first one stored counts."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return
        if self._metrics.setdefault((trial_id, total_batches), float(value)) != float(value):
            return
        self._changed.add(trial_id)
        for ref in self._by_trial.get(trial_id, {}).values():
            if ref.total_batches == total_batches:
                self._rank(ref)

    def deleted(self, uuid: str) -> bool:
        """The store confirmed the deletion; True when the checkpoint was this experiment's."""
        return self._doomed.pop(uuid, None) is not None

    def discard(self, uuid: str) -> bool:
        """Deleted another way (by a user): forget it; True when it was this experiment's."""
        if uuid in self._owner:
            self._forget(uuid)
        return self.deleted(uuid)

    def collect(self, live_trial_ids: Collection[int], protected: Collection[str]) -> list[str]:
        """Uuids to delete now: newly doomed ones and earlier ones not yet confirmed deleted."""
        live, kept = frozenset(live_trial_ids), frozenset(protected)
        trials = self._changed | self._best | (self._live - live)
        trials.update(self._owner[u] for u in self._protected - kept if u in self._owner)
        self._changed, self._live, self._protected = set(), live, kept
        count = self.policy.save_experiment_best
        self._best = {ref.trial_id for _, ref in self._ranked[:count]} if count else set()
        trials |= self._best
        subset = [ref for t in trials for ref in self._by_trial.get(t, {}).values()]
        for uuid in checkpoints_to_delete(subset, self._metrics, self.policy, live, kept):
            self._forget(uuid)
        return [
            ref.uuid
            for ref in sorted(self._doomed.values(), key=lambda c: (c.trial_id, c.total_batches, c.uuid))
        ]

    def _rank(self, ref: CheckpointRef) -> None:
        value = self._metrics.get((ref.trial_id, ref.total_batches))
        if not self.policy.save_experiment_best or value is None or ref.uuid in self._keys:
            return
        sign = 1.0 if self.policy.smaller_is_better else -1.0
        key = (sign * value, -ref.total_batches, ref.trial_id, ref.uuid)  # as _best orders them
        bisect.insort(self._ranked, (key, ref))  # keys are unique (uuid): refs are never compared
        self._keys[ref.uuid] = key

    def _forget(self, uuid: str) -> None:
        trial_id = self._owner.pop(uuid)
        ref = self._by_trial[trial_id].pop(uuid)
        if not self._by_trial[trial_id]:
            del self._by_trial[trial_id]
        key = self._keys.pop(uuid, None)
        if key is not None:
            del self._ranked[bisect.bisect_left(self._ranked, (key,))]
        self._doomed[uuid] = ref
