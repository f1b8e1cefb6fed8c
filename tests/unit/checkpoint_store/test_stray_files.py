"""Files a removal of files left behind: `remove_files` rewrites the record, then deletes the bytes;
a crash in between leaves bytes under a kept checkpoint's prefix that its record no longer lists.
The orphan sweep removes them once older than its grace, and nothing the record lists, on a local
directory (S3: tests/integration/checkpoint_store/test_s3_orphan_sweep.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from test_checkpoint_store_logic import FILES, begin, chunks, download, new_store, upload
from test_orphan_sweep import age

from pedl_checkpoint_store import layout
from pedl_checkpoint_store.local import LocalFilesystemBackend
from pedl_checkpoint_store.orphan_sweep import stray_files
from pedl_checkpoint_store.stray_files import StrayFiles
from pedl_checkpoint_store.sweeper import OrphanSweeper

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)


def test_only_old_files_the_record_no_longer_lists_go() -> None:
    stored = {
        "kept.pt": NOW - 9 * HOUR,
        "gone.pt": NOW - HOUR,
        "young.pt": NOW - HOUR / 2,
        "a/b": NOW - 2 * HOUR,
    }
    assert stray_files(stored, {"kept.pt"}, NOW, HOUR) == ["a/b", "gone.pt"]
    assert stray_files(stored, set(stored), NOW, timedelta(0)) == []
    assert stray_files({}, {"kept.pt"}, NOW, timedelta(0)) == []  # a record's file lost: not ours to fix


def crashed_removal(store_root: Path, monkeypatch: pytest.MonkeyPatch, globs: list[str]) -> str:
    """A checkpoint whose removal of `globs` crashed between the record's rewrite and the bytes'
    deletion; the store then restarted. Its uuid."""
    store = new_store(store_root)
    cp = upload(store, FILES)

    def crash(self: LocalFilesystemBackend, key: str) -> None:
        raise SystemExit("the store died")

    with monkeypatch.context() as m, pytest.raises(SystemExit):
        m.setattr(LocalFilesystemBackend, "delete", crash)
        store.remove_files(cp.uuid, globs)
    return cp.uuid


def test_bytes_a_crashed_removal_left_go_after_the_grace_and_the_rest_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uuid = crashed_removal(tmp_path, monkeypatch, ["opt"])
    store = new_store(tmp_path)  # restarted: the record on storage lists the files kept
    assert sorted(f.path for f in store.get(uuid).files) == ["empty", "model/weights.pt"]
    stray = tmp_path / layout.data_key(uuid, "opt/state")
    assert stray.exists()
    sweeper = OrphanSweeper(store, grace_seconds=3600)
    assert sweeper.sweep_once().stray_files == []  # young: perhaps a client still PUTting
    assert stray.exists()
    age(tmp_path / uuid, 7200)
    report = sweeper.sweep_once()
    assert report.stray_files == [f"{uuid}/opt/state"] and report.removed == []
    assert not stray.exists()
    assert download(store, uuid) == {p: d for p, d in FILES.items() if p != "opt/state"}
    assert store.missing_files(uuid) == []
    assert new_store(tmp_path).get(uuid) == store.get(uuid)  # its record untouched
    assert sweeper.sweep_once().stray_files == []


def test_recorded_files_and_markers_stay_with_no_grace_at_all(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cps = [upload(store, FILES, trial_id=t) for t in range(3)]
    store.remove_files(cps[0].uuid, ["empty"])  # finished: nothing stray
    age(tmp_path, 30 * 24 * 3600)
    sweeper = OrphanSweeper(store, grace_seconds=0)
    for _ in range(3):
        assert sweeper.sweep_once().stray_files == []
    assert download(store, cps[0].uuid) == {p: d for p, d in FILES.items() if p != "empty"}
    assert download(store, cps[1].uuid) == FILES
    assert {c.uuid for c in new_store(tmp_path).list()} == {c.uuid for c in cps}


def test_each_pass_checks_a_few_checkpoints_in_turn(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    uuids = sorted(upload(store, FILES, trial_id=t).uuid for t in range(3))
    for uuid in uuids:
        (tmp_path / layout.data_key(uuid, "left.bin")).write_bytes(b"left behind")
    strays = StrayFiles(store, timedelta(0), per_pass=2)
    later = datetime.now(timezone.utc) + HOUR
    assert strays.sweep(later) == [f"{u}/left.bin" for u in uuids[:2]]
    (tmp_path / layout.data_key(uuids[0], "again.bin")).write_bytes(b"left behind")
    assert strays.sweep(later) == [f"{uuids[2]}/left.bin", f"{uuids[0]}/again.bin"]  # round the end
    assert strays.sweep(later) == []
    for uuid in uuids:
        assert download(store, uuid) == FILES


def test_an_upload_in_progress_is_never_touched(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    up = begin(store)
    for c in chunks("model/weights.pt", FILES["model/weights.pt"]):
        up.add_chunk(c)
    age(tmp_path / up.uuid, 30 * 24 * 3600)
    assert OrphanSweeper(store, grace_seconds=0).sweep_once().stray_files == []
    up.add_chunk(chunks("empty", b"")[0])
    cp = up.finish()
    assert download(store, cp.uuid) == {"model/weights.pt": FILES["model/weights.pt"], "empty": b""}


def test_the_local_backend_lists_every_file_under_a_prefix(tmp_path: Path) -> None:
    backend = LocalFilesystemBackend(tmp_path)
    backend.put_bytes("u/data/a", b"1")
    backend.put_bytes("u/data/d/e/b", b"2")
    backend.put_bytes("u/checkpoint.json", b"{}")
    listed = backend.modified_under("u/data")
    assert sorted(listed) == ["a", "d/e/b"]
    assert all(t.tzinfo is not None and abs(datetime.now(timezone.utc) - t) < HOUR for t in listed.values())
    assert backend.modified_under("nothing/here") == {}
    with pytest.raises(ValueError, match="prefix"):
        backend.modified_under("")
