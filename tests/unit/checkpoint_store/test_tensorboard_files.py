"""Trials' own TensorBoard files in the store: a file sent again replaces the one stored, listings
and downloads show what is stored, deleting an experiment removes its files (and only its), and
neither a restart nor the orphan sweep loses them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from test_checkpoint_store_logic import FILES, chunks, new_store, upload
from test_orphan_sweep import age

from pedl_checkpoint_store.errors import InvalidArgument, NotFound
from pedl_checkpoint_store.sweeper import OrphanSweeper
from pedl_checkpoint_store.tensorboard_files import TensorboardFiles


def files_of(root: Path) -> TensorboardFiles:
    store = new_store(root)
    return TensorboardFiles(store.catalog, store.resolver)


def send(
    tb: TensorboardFiles, exp: int, trial: int, files: dict[str, bytes], storage: dict | None = None
) -> int:
    up = tb.begin(exp, trial, storage)
    for path, data in files.items():
        for c in chunks(path, data):
            up.add_chunk(c)
    return up.finish()


def read(tb: TensorboardFiles, exp: int, trial: int, path: str) -> bytes:
    pieces = list(tb.open(exp, trial, path, chunk_size=3))
    data = b"".join(p.data for p in pieces)
    assert pieces[-1].last and pieces[-1].sha256 == hashlib.sha256(data).hexdigest()
    return data


def test_a_grown_file_replaces_the_stored_one_and_listings_show_sizes(tmp_path: Path) -> None:
    tb = files_of(tmp_path)
    assert send(tb, 1, 2, {"events.out.tfevents.1": b"abc", "eval/events.out.tfevents.2": b""}) == 2
    send(tb, 1, 2, {"events.out.tfevents.1": b"abcdefgh"})
    send(tb, 1, 3, {"events.out.tfevents.9": b"xyz"})
    listed = [(f.trial_id, f.path, f.size) for f in tb.list(1)]
    assert listed == [
        (2, "eval/events.out.tfevents.2", 0),
        (2, "events.out.tfevents.1", 8),
        (3, "events.out.tfevents.9", 3),
    ]
    assert [f.path for f in tb.list(1, trial_id=3)] == ["events.out.tfevents.9"]
    assert read(tb, 1, 2, "events.out.tfevents.1") == b"abcdefgh"
    assert read(tb, 1, 2, "eval/events.out.tfevents.2") == b""
    with pytest.raises(NotFound, match="has no TensorBoard file 'nope'"):
        tb.open(1, 2, "nope", 3)
    assert tb.list(7) == []


def test_bad_paths_and_hashes_are_refused_and_store_nothing(tmp_path: Path) -> None:
    tb = files_of(tmp_path)
    for bad in ("../escape", "/abs", "a/../../b"):
        up = tb.begin(1, 2, None)
        with pytest.raises(InvalidArgument):
            for c in chunks(bad, b"data"):
                up.add_chunk(c)
    up = tb.begin(1, 2, None)
    wrong = chunks("f", b"data")
    wrong[-1].sha256 = "0" * 64
    with pytest.raises(InvalidArgument, match="sha256 mismatch"):
        for c in wrong:
            up.add_chunk(c)
    up.abort()
    assert tb.list(1) == []
    with pytest.raises(InvalidArgument, match="trial_id must be positive"):
        tb.begin(1, 0, None)


def test_deleting_an_experiment_removes_its_files_only(tmp_path: Path) -> None:
    tb = files_of(tmp_path)
    send(tb, 1, 2, {"a": b"1", "b/c": b"22"})
    send(tb, 1, 3, {"a": b"3"})
    send(tb, 4, 5, {"a": b"4"})
    assert tb.delete_experiment(1) == 3
    assert tb.list(1) == [] and not (tmp_path / "tensorboard" / "1").exists()
    assert read(tb, 4, 5, "a") == b"4"
    assert tb.delete_experiment(1) == 0


def test_files_on_shared_fs_storage_go_where_the_experiment_stores_checkpoints(tmp_path: Path) -> None:
    store_root, shared = tmp_path / "store", tmp_path / "shared"
    store = new_store(store_root, shared)
    tb = TensorboardFiles(store.catalog, store.resolver)
    storage = {"type": "shared_fs", "host_path": str(shared)}
    send(tb, 6, 7, {"run/events.out.tfevents.1": b"ev"}, storage)
    assert (shared / "tensorboard" / "6" / "7" / "run" / "events.out.tfevents.1").read_bytes() == b"ev"
    # A later trial's upload goes where the first one's did, so the experiment's files are deleted together.
    send(tb, 6, 8, {"x": b"y"}, None)
    assert (shared / "tensorboard" / "6" / "8" / "x").exists()
    assert tb.delete_experiment(6) == 2
    assert not (shared / "tensorboard" / "6").exists() and not (store_root / "tensorboard" / "6").exists()


def test_a_restart_and_the_orphan_sweep_keep_them(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    tb = TensorboardFiles(store.catalog, store.resolver)
    upload(store, FILES)
    send(tb, 1, 2, {"events.out.tfevents.1": b"abc"})
    age(tmp_path, 30 * 24 * 3600)
    again = new_store(tmp_path)
    for _ in range(3):
        assert OrphanSweeper(again, grace_seconds=0).sweep_once().removed == []
    tb = TensorboardFiles(again.catalog, again.resolver)
    assert read(tb, 1, 2, "events.out.tfevents.1") == b"abc"
