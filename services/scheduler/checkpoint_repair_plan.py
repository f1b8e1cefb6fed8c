"""What to repair where the scheduler's checkpoint records and the store's listing disagree.

Pure logic; `checkpoint_reconciler.py` reads both sides and acts. Both directions:
- a DELETING row is a deletion a crash (or an unreachable store) interrupted: finish it;
- a DELETED row the store still lists is deleted again;
- a COMPLETED row the store does not list has lost its bytes: it becomes MISSING (never listed,
  never resumed from) once the store confirms it has no such checkpoint; a MISSING one the store
  lists again (its storage came back) is COMPLETED again once the store finds all its files;
- a COMPLETED row the store lists may still have lost files at its storage (a deletion that raced an
  upload of the same uuid, a storage that lost recent writes): the store is asked to check the
  files of a few such rows each pass (`to_check`, in turn, so every one is checked in time), and one
  with files gone on two passes running becomes MISSING;
- a stored checkpoint the scheduler has no row for is an orphan: a trial uploads before the
  scheduler records it, so only one older than the grace period counts. It is deleted when its
  experiment is gone or ended (nothing will ever record it), and reported while it still runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

ENDED = ("COMPLETED", "ERROR", "CANCELED")


@dataclass(frozen=True)
class Stored:
    """One checkpoint the store lists."""

    uuid: str
    experiment_id: int
    created_at: datetime


@dataclass
class Plan:
    finish_deleting: list[str] = field(default_factory=list)
    delete_again: list[str] = field(default_factory=list)
    maybe_missing: list[str] = field(default_factory=list)  # the store is asked once more before marking
    found_again: list[str] = field(default_factory=list)  # the store is asked for its files first
    files_missing: list[str] = field(default_factory=list)  # filled in by the reconciler's file checks
    orphans_to_delete: list[str] = field(default_factory=list)
    orphans_kept: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        return not any(vars(self).values())


def plan(
    stored: Iterable[Stored],
    rows: Mapping[str, str],
    experiments: Mapping[int, str],
    now: datetime,
    grace: timedelta,
) -> Plan:
    """`rows`: every recorded checkpoint's state by uuid; `experiments`: every experiment's state by id."""
    out = Plan()
    listed: set[str] = set()
    for s in sorted(stored, key=lambda s: s.uuid):
        listed.add(s.uuid)
        state = rows.get(s.uuid)
        if state == "DELETED":
            out.delete_again.append(s.uuid)
        elif state == "MISSING":
            out.found_again.append(s.uuid)
        elif state is None and now - s.created_at >= grace:
            exp_state = experiments.get(s.experiment_id)
            gone = s.experiment_id > 0 and (exp_state is None or exp_state in ENDED)
            (out.orphans_to_delete if gone else out.orphans_kept).append(s.uuid)
    for uuid, state in sorted(rows.items()):
        if state == "DELETING":
            out.finish_deleting.append(uuid)
        elif state == "COMPLETED" and uuid not in listed:
            out.maybe_missing.append(uuid)
    return out


def to_check(stored: Iterable[Stored], rows: Mapping[str, str], after: str, limit: int) -> list[str]:
    """Up to `limit` of the checkpoints the store lists and the scheduler holds COMPLETED, in uuid
    order from just after `after` and round again: whose files the store checks this pass."""
    candidates = sorted(s.uuid for s in stored if rows.get(s.uuid) == "COMPLETED")
    return ([u for u in candidates if u > after] + [u for u in candidates if u <= after])[:limit]
