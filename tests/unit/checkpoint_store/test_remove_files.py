"""Removing some of a checkpoint's files (Determined's `checkpoints/rm`): which files a glob names, and
the store's record, bytes and recovery afterwards, on a local directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_checkpoint_store_logic import download, new_store, upload

from pedl.checkpoints.file_globs import matching
from pedl_checkpoint_store import layout
from pedl_checkpoint_store.errors import InvalidArgument, NotFound

PATHS = ["state", "metadata.json", "model/weights.pt", "model/deep/opt.pt", "logs/a.txt", "statefile"]


@pytest.mark.parametrize(
    ("globs", "named"),
    [
        (["state"], ["state"]),  # a whole name, not a prefix of another
        (["model"], ["model/weights.pt", "model/deep/opt.pt"]),  # a folder: all within it
        (["*.json"], ["metadata.json"]),  # `*` stays within one segment
        (["model/*"], ["model/weights.pt", "model/deep/opt.pt"]),  # a folder matched by `*`
        (["**/*.pt"], ["model/weights.pt", "model/deep/opt.pt"]),
        (["**/*"], PATHS),
        (["stat?"], ["state"]),
        (["[lm]*/*.txt"], ["logs/a.txt"]),
        (["[!m]*"], ["state", "logs/a.txt", "statefile"]),
        (["state", "logs/*"], ["state", "logs/a.txt"]),
        ([""], []),  # Determined's "refresh only"
        ([], []),
        (["nothing"], []),
    ],
)
def test_globs_name_the_files_determined_would_remove(globs: list[str], named: list[str]) -> None:
    assert matching(PATHS, globs) == [p for p in PATHS if p in named]


@pytest.mark.parametrize(
    ("glob", "message"),
    [("/etc/passwd", "relative to the checkpoint"), ("../other", "must not leave"), ("  ", "only spaces")],
)
def test_bad_globs_are_refused_in_one_line(glob: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        matching(PATHS, [glob])


FILES = {"state": b"optimizer", "metadata.json": b"{}", "model/weights.pt": b"0123456789"}


def test_removed_files_leave_record_storage_and_a_restarted_store(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES)
    kept, removed = store.remove_files(cp.uuid, ["state"])
    assert removed == ["state"]
    assert sorted(f.path for f in kept.files) == ["metadata.json", "model/weights.pt"]
    assert kept.total_size == 12
    assert store.get(cp.uuid) == kept
    assert not (tmp_path / layout.data_key(cp.uuid, "state")).exists()
    assert download(store, cp.uuid) == {p: d for p, d in FILES.items() if p != "state"}
    assert store.missing_files(cp.uuid) == []
    assert new_store(tmp_path).get(cp.uuid) == kept  # the record on storage says so too


def test_no_match_changes_nothing_and_everything_leaves_an_empty_record(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES)
    assert store.remove_files(cp.uuid, ["nothing", ""]) == (cp, [])
    kept, removed = store.remove_files(cp.uuid, ["**/*"])
    assert sorted(removed) == sorted(FILES)
    assert (list(kept.files), kept.total_size) == ([], 0)
    store.delete(cp.uuid)  # the scheduler deletes an emptied checkpoint
    assert store.list() == []


def test_unknown_checkpoint_and_bad_glob_are_refused(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES)
    with pytest.raises(NotFound, match="not found"):
        store.remove_files("00000000-0000-0000-0000-000000000000", ["state"])
    with pytest.raises(InvalidArgument, match="must not leave the checkpoint"):
        store.remove_files(cp.uuid, ["../x"])
    assert store.get(cp.uuid) == cp
