"""What the harness uploads of a trial's own TensorBoard files: new and grown files only, from the
run's TensorBoard directory and the sandbox's /tmp/tensorboard, and in a Core API script's MANUAL
mode only what it names, from inside those directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pedl.checkpoints.errors import CheckpointError
from pedl.checkpoints.tensorboard import prefix_chunks
from pedl.harness.tensorboard_sync import TensorboardUploader, changed_files, run_directories


def uploader(trial_dir: Path) -> tuple[TensorboardUploader, list[list[tuple[str, int]]]]:
    sent: list[list[tuple[str, int]]] = []
    up = TensorboardUploader(
        run_directories(trial_dir), lambda files: sent.append([(r, s) for r, _, s in files])
    )
    return up, sent


def test_only_new_and_grown_files_are_sent_again(tmp_path: Path) -> None:
    up, sent = uploader(tmp_path)
    tb = tmp_path / "tensorboard"
    (tb / "train").mkdir(parents=True)
    (tb / "train" / "events.out.tfevents.1").write_bytes(b"abc")
    assert up.sync() == 1
    assert up.sync() == 0
    with open(tb / "train" / "events.out.tfevents.1", "ab") as f:
        f.write(b"de")
    (tb / "events.out.tfevents.2").write_bytes(b"")
    assert up.sync() == 2
    assert sent == [
        [("train/events.out.tfevents.1", 3)],
        [("events.out.tfevents.2", 0), ("train/events.out.tfevents.1", 5)],
    ]


def test_the_sandboxs_tmp_tensorboard_is_collected_and_the_run_directory_wins_a_clash(tmp_path: Path) -> None:
    (tmp_path / "tensorboard").mkdir()
    (tmp_path / ".tmp" / "tensorboard" / "run").mkdir(parents=True)
    (tmp_path / "tensorboard" / "same").write_bytes(b"mine")
    (tmp_path / ".tmp" / "tensorboard" / "same").write_bytes(b"other!")
    (tmp_path / ".tmp" / "tensorboard" / "run" / "events").write_bytes(b"x")
    os.symlink("/etc/passwd", tmp_path / "tensorboard" / "link")
    found = [(p.rel, p.size) for p in changed_files(run_directories(tmp_path), {})]
    assert found == [("run/events", 1), ("same", 4)]


def test_manual_mode_sends_nothing_by_itself_and_only_named_files_from_inside(tmp_path: Path) -> None:
    up, sent = uploader(tmp_path)
    (tmp_path / "tensorboard").mkdir()
    (tmp_path / "tensorboard" / "ev").write_bytes(b"12")
    up.set_manual()
    assert up.sync() == 0
    assert up.upload_named([[str(tmp_path / "tensorboard" / "ev"), "rank0/ev"]]) == 1
    assert sent == [[("rank0/ev", 2)]]
    (tmp_path / "secret").write_text("s")
    with pytest.raises(ValueError, match="is not inside the TensorBoard directory"):
        up.upload_named([[str(tmp_path / "secret"), "secret"]])
    with pytest.raises(ValueError):
        up.upload_named([[str(tmp_path / "tensorboard" / "ev"), "../up"]])


def test_a_growing_file_is_sent_up_to_the_size_found(tmp_path: Path) -> None:
    path = tmp_path / "ev"
    path.write_bytes(b"0123456789")
    pieces = list(prefix_chunks("ev", path, 7, chunk_size=3))
    assert b"".join(p.data for p in pieces) == b"0123456" and pieces[-1].last and pieces[-1].sha256
    assert [p.offset for p in pieces] == [0, 3, 6]
    with pytest.raises(CheckpointError, match="shrank"):
        list(prefix_chunks("ev", path, 20, chunk_size=3))
