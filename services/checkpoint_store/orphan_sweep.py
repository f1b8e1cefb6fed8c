"""Which checkpoint prefixes in a storage nobody claims, and which files under a kept checkpoint's
prefix its record no longer lists: the decisions of the store's orphan sweep.

Pure logic; `sweeper.py` lists the storages, asks the store what it claims, and removes. An upload
stores bytes before its record, and a client may still be PUTting on presigned URLs that a store
which has since restarted handed out, so a prefix is an orphan only once its newest object is older
than the grace period. Names that are not canonical UUIDs are never the store's, so never touched.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from pedl_checkpoint_store import layout

# Past the hour a presigned URL works (store.URL_SECONDS), with a margin: a client that still holds
# one from before a restart of the store can write no more once the prefix is this old.
DEFAULT_GRACE_SECONDS = 7200.0
DEFAULT_INTERVAL_SECONDS = 600.0
# Kept checkpoints whose files one pass lists (in turn, pass after pass): each is one listing of
# storage, and what it finds (a crash inside a removal of files) is rare.
FILE_CHECKS_PER_PASS = 100


@dataclass(frozen=True)
class Orphan:
    uuid: str
    age_seconds: float


def orphans(
    newest: Mapping[str, datetime],
    claimed: Collection[str],
    now: datetime,
    grace: timedelta,
) -> list[Orphan]:
    """`newest`: each top-level name in a storage and the newest modification under it; `claimed`:
    the uuids the store holds a record or an upload in progress for. The orphans to remove."""
    out: list[Orphan] = []
    for name, modified in sorted(newest.items()):
        if name in claimed or not layout.is_checkpoint_name(name):
            continue
        age = now - modified
        if age >= grace:
            out.append(Orphan(name, age.total_seconds()))
    return out


def abandoned(
    started: Mapping[str, datetime], newest: Mapping[str, datetime], now: datetime, grace: timedelta
) -> list[str]:
    """Direct uploads (uuid -> when begun) that nothing was written for since the grace: a client
    sends its bytes right after BeginUpload and finishes right after its last byte, so one that has
    been silent that long is dead (killed between its PUTs and FinishUpload). `newest` as above."""
    out = []
    for uuid, began in sorted(started.items()):
        last = max(began, newest.get(uuid, began))
        if now - last >= grace:
            out.append(uuid)
    return out


def stray_files(
    stored: Mapping[str, datetime], recorded: Collection[str], now: datetime, grace: timedelta
) -> list[str]:
    """`stored`: each file under a kept checkpoint's data prefix and when it was last written;
    `recorded`: the paths its record lists. The files to remove: those the record no longer lists
    (a removal of files rewrites the record before it deletes the bytes, and may crash in between),
    once older than the grace (a client may still PUT on a URL presigned before the removal)."""
    return sorted(p for p, modified in stored.items() if p not in recorded and now - modified >= grace)
