"""The model definition travels inside each checkpoint of a Trial class, so a downloaded checkpoint
loads on its own (`det.pytorch.load_trial_from_checkpoint_path(path)`, as Determined documents).

Layout added to a checkpoint directory:
  model_definition/      the model definition's files as the trial started (before download_data
                         or training wrote anything beside them)
  experiment_config.json the experiment config (entrypoint, hyperparameters, data), without
                         `checkpoint_storage`, which may hold credentials

Script trials and Core API scripts keep their checkpoint directories as the user wrote them.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CODE_DIR = "model_definition"
CONFIG_FILE = "experiment_config.json"
# Left out of model_definition/: caches and version control, which no import needs.
_SKIPPED_PARTS = {"__pycache__", ".git"}
# Config sections that may carry secrets (storage credentials) and that loading never needs.
_PRIVATE_SECTIONS = ("checkpoint_storage",)


@dataclass(frozen=True)
class ModelCode:
    root: Path
    files: tuple[Path, ...]  # relative to root
    experiment_config: dict[str, Any]


_current: ModelCode | None = None


def record(root: Path, experiment_config: dict[str, Any]) -> None:
    """Notes the model definition's files now, before the trial writes anything into its directory."""
    global _current
    root = Path(root).resolve()
    files = tuple(
        sorted(
            p.relative_to(root)
            for p in root.rglob("*")
            if p.is_file() and not _SKIPPED_PARTS.intersection(p.relative_to(root).parts)
        )
    )
    public = {k: v for k, v in experiment_config.items() if k not in _PRIVATE_SECTIONS}
    _current = ModelCode(root, files, public)


def forget() -> None:
    global _current
    _current = None


def add_to_checkpoint(directory: Path) -> None:
    """Copies the recorded model definition into `directory` (a checkpoint the controller just wrote)."""
    code = _current
    if code is None or (directory / CODE_DIR).exists():
        return
    target = directory / CODE_DIR
    target.mkdir()
    for relative in code.files:
        source = code.root / relative
        if not source.is_file():  # the trial deleted it while running: nothing to keep
            continue
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / relative)
    config = json.dumps(code.experiment_config, indent=2, sort_keys=True, default=str)
    (directory / CONFIG_FILE).write_text(config + "\n")
