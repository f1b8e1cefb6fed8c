"""Checkpoints of Trial classes carry the model definition as it started, and the config without
its storage credentials, so a downloaded checkpoint loads on its own."""

from __future__ import annotations

import json
from pathlib import Path

from pedl.harness import model_code


def write_model(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "model_def.py").write_text("X = 1\n")
    (root / "pkg" / "layers.py").write_text("Y = 2\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "model_def.cpython-311.pyc").write_bytes(b"\0")
    return root


def test_a_checkpoint_gets_the_files_of_the_model_definition_as_it_started(tmp_path) -> None:
    root = write_model(tmp_path / "model")
    config = {
        "entrypoint": "model_def:MyTrial",
        "hyperparameters": {"lr": 0.1},
        "checkpoint_storage": {"type": "s3", "secret_key": "hunter2"},
    }
    model_code.record(root, config)
    (root / "downloaded.bin").write_bytes(b"data written by download_data")  # after the trial started
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    try:
        model_code.add_to_checkpoint(checkpoint)
    finally:
        model_code.forget()
    code = checkpoint / model_code.CODE_DIR
    assert sorted(p.relative_to(code).as_posix() for p in code.rglob("*") if p.is_file()) == [
        "model_def.py",
        "pkg/layers.py",
    ]
    saved = json.loads((checkpoint / model_code.CONFIG_FILE).read_text())
    assert saved == {"entrypoint": "model_def:MyTrial", "hyperparameters": {"lr": 0.1}}


def test_without_a_recorded_model_definition_the_checkpoint_is_left_as_written(tmp_path) -> None:
    model_code.forget()
    model_code.add_to_checkpoint(tmp_path)
    assert list(tmp_path.iterdir()) == []
