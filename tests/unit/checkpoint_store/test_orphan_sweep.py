"""The orphan sweep: checkpoint bytes on storage that no record and no upload in progress claims go
once older than the grace; whatever a user recorded, or is still uploading, stays."""

import os
import time
import uuid as uuidlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from test_checkpoint_store_logic import FILES, begin, chunks, download, new_store, upload

from pedl_checkpoint_store import layout
from pedl_checkpoint_store.local import LocalFilesystemBackend
from pedl_checkpoint_store.orphan_sweep import Orphan, abandoned, orphans
from pedl_checkpoint_store.sweeper import OrphanSweeper

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)
A, B, C = (str(uuidlib.UUID(int=(i << 64) + 0xABCDEF)) for i in (1, 2, 3))


# -- the decision alone ------------------------------------------------------------------------


def test_an_unclaimed_prefix_goes_only_once_older_than_the_grace() -> None:
    newest = {A: NOW - 2 * HOUR, B: NOW - HOUR, C: NOW - HOUR + timedelta(seconds=1)}
    assert orphans(newest, set(), NOW, HOUR) == [Orphan(A, 7200.0), Orphan(B, 3600.0)]


def test_a_claimed_prefix_stays_however_old() -> None:
    newest = {A: NOW - 1000 * HOUR, B: NOW - 1000 * HOUR}
    assert orphans(newest, {A, B}, NOW, HOUR) == []


def test_names_that_are_not_canonical_uuids_are_never_touched() -> None:
    old = NOW - 1000 * HOUR
    newest = {"storages.json": old, "README": old, A.upper(): old, A.replace("-", ""): old, "": old}
    assert orphans(newest, set(), NOW, HOUR) == []


def test_a_prefix_written_after_now_is_young() -> None:
    assert orphans({A: NOW + HOUR}, set(), NOW, timedelta(0)) == []


def test_a_direct_upload_silent_for_the_grace_is_abandoned() -> None:
    started = {A: NOW - 2 * HOUR, B: NOW - 2 * HOUR, C: NOW - timedelta(minutes=5)}
    newest = {A: NOW - timedelta(minutes=1)}  # still being written to; B never was; C is young
    assert abandoned(started, newest, NOW, HOUR) == [B]
    assert abandoned(started, {A: NOW - HOUR}, NOW, HOUR) == [A, B]


# -- the store's sweep on local storage ----------------------------------------------------------


def age(path: Path, seconds: float) -> None:
    """Makes `path` and everything under it look written `seconds` ago."""
    then = time.time() - seconds
    for parent, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.utime(os.path.join(parent, name), (then, then))
    os.utime(path, (then, then))


def orphan_in(root: Path, uuid: str | None = None) -> Path:
    """Bytes under a checkpoint-shaped prefix that no record claims, as a crashed upload leaves them."""
    prefix = root / (uuid or str(uuidlib.uuid4()))
    (prefix / "data" / "model").mkdir(parents=True)
    (prefix / "data" / "model" / "weights.pt").write_bytes(b"orphaned bytes")
    return prefix


def test_recorded_checkpoints_survive_many_sweeps_with_no_grace_at_all(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    recorded = [upload(store, FILES, experiment_id=1, trial_id=t) for t in range(3)]
    age(tmp_path, 30 * 24 * 3600)
    sweeper = OrphanSweeper(store, grace_seconds=0)
    for _ in range(20):
        assert sweeper.sweep_once().removed == []
    for cp in recorded:
        assert download(store, cp.uuid) == FILES
    # ... and after a restart, from the records on storage alone.
    again = new_store(tmp_path)
    for _ in range(5):
        assert OrphanSweeper(again, grace_seconds=0).sweep_once().removed == []
    assert sorted(c.uuid for c in again.list()) == sorted(c.uuid for c in recorded)


def test_an_old_unrecorded_prefix_is_removed_and_a_young_one_kept(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    kept = upload(store, FILES)
    old, young = orphan_in(tmp_path), orphan_in(tmp_path)
    age(old, 7200)
    report = OrphanSweeper(store, grace_seconds=3600).sweep_once()
    assert report.removed == [old.name]
    assert not old.exists() and young.exists()
    assert download(store, kept.uuid) == FILES


def test_an_upload_in_progress_is_never_swept(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    up = begin(store)
    for c in chunks("model/weights.pt", FILES["model/weights.pt"]):
        up.add_chunk(c)
    age(tmp_path / up.uuid, 30 * 24 * 3600)
    sweeper = OrphanSweeper(store, grace_seconds=0)
    assert sweeper.sweep_once().removed == []
    up.add_chunk(chunks("empty", b"")[0])
    cp = up.finish()
    assert sweeper.sweep_once().removed == []
    assert download(store, cp.uuid) == {"model/weights.pt": FILES["model/weights.pt"], "empty": b""}


def test_an_aborted_upload_whose_marker_stayed_is_swept_with_its_marker(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    prefix = orphan_in(tmp_path)
    (prefix / layout.INCOMPLETE).write_bytes(layout.encode_marker({}))  # a crash, then a failed removal
    age(prefix, 100)
    assert OrphanSweeper(store, grace_seconds=10).sweep_once().removed == [prefix.name]
    assert not prefix.exists()


def test_a_prefix_with_an_unreadable_record_is_kept(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    prefix = orphan_in(tmp_path)
    (prefix / layout.RECORD).write_text("{not json")
    store = new_store(tmp_path)  # the record is skipped at load: not in the index
    age(prefix, 100)
    assert OrphanSweeper(store, grace_seconds=0).sweep_once().removed == []
    assert (prefix / "data" / "model" / "weights.pt").exists()


def test_shared_fs_storage_is_swept_also_after_its_last_checkpoint_was_deleted_and_a_restart(
    tmp_path: Path,
) -> None:
    catalog, shared = tmp_path / "catalog", tmp_path / "shared"
    shared.mkdir()
    storage = {"type": "shared_fs", "host_path": str(shared), "storage_path": "ckpts"}
    store = new_store(catalog, shared)
    cp = upload(store, FILES, storage=storage)
    left = orphan_in(shared / "ckpts")
    age(left, 100)
    assert OrphanSweeper(store, grace_seconds=10).sweep_once().removed == [left.name]
    assert download(store, cp.uuid) == FILES
    store.delete(cp.uuid)
    again = orphan_in(shared / "ckpts")
    age(again, 100)
    restarted = new_store(catalog, shared)  # nothing recorded names the shared storage any more
    assert OrphanSweeper(restarted, grace_seconds=10).sweep_once().removed == [again.name]
    assert not again.exists()


def test_a_deletion_whose_storage_failed_is_finished_by_the_next_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, shared = tmp_path / "catalog", tmp_path / "shared"
    shared.mkdir()
    storage = {"type": "shared_fs", "host_path": str(shared), "storage_path": "ckpts"}
    store = new_store(catalog, shared)
    cp = upload(store, FILES, storage=storage)
    removal = LocalFilesystemBackend.delete_prefix

    def unreachable(self: LocalFilesystemBackend, prefix: str) -> None:
        if self.root.is_relative_to(shared):
            raise OSError("shared storage unreachable")
        removal(self, prefix)

    with monkeypatch.context() as m:
        m.setattr(LocalFilesystemBackend, "delete_prefix", unreachable)
        store.delete(cp.uuid)
    assert (shared / "ckpts" / cp.uuid).exists() and (catalog / cp.uuid / layout.DELETING).exists()
    assert OrphanSweeper(store, grace_seconds=3600).sweep_once().retried_removals == [cp.uuid]
    assert not (shared / "ckpts" / cp.uuid).exists() and not (catalog / cp.uuid).exists()


def test_a_checkpoint_deleted_while_the_sweep_lists_is_not_taken_for_an_orphan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES)
    age(tmp_path, 7200)
    listing = LocalFilesystemBackend.newest_by_child

    def deleted_meanwhile(self: LocalFilesystemBackend, skip: object = ()) -> dict:
        found = listing(self)  # everything, as S3 lists it, whatever the sweep would skip
        if cp.uuid in store.claimed():
            store.delete(cp.uuid)  # by its owner, between the listing and the sweep's decision
        return found

    monkeypatch.setattr(LocalFilesystemBackend, "newest_by_child", deleted_meanwhile)
    assert OrphanSweeper(store, grace_seconds=10).sweep_once().removed == []
    assert not (tmp_path / cp.uuid).exists()
