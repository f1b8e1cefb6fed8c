"""Fetching the event files trials wrote themselves (Determined's TensorBoard writers, a Core API
script's SummaryWriter) from the checkpoint store into the log directory, beside the metric runs.

Each refresh lists the experiments' stored files and downloads those new or changed since the last
one (the harness re-sends a file whenever it grew), so TensorBoard sees them grow while trials run.
"""

from __future__ import annotations

from pathlib import Path

from pedl.checkpoints import CheckpointStoreClient, tensorboard
from pedl.checkpoints.paths import validate_relpath


def files_dir(logdir: Path, experiment_id: int, trial_id: int) -> Path:
    """Where a trial's own files go: one run (or a tree of runs) beside its training/validation runs."""
    return logdir / f"exp-{experiment_id}" / f"trial-{trial_id}" / "files"


class TrialFilesSync:
    def __init__(
        self,
        store: CheckpointStoreClient,
        logdir: Path,
        experiment_ids: list[int],
        only_trials: dict[int, set[int]] | None = None,
    ) -> None:
        """`only_trials`: for an experiment named there, only those trials' files."""
        self.store = store
        self.logdir = logdir
        self.experiment_ids = list(dict.fromkeys(experiment_ids))
        self.only_trials = only_trials or {}
        self._have: dict[tuple[int, int, str], str] = {}  # (experiment, trial, path) -> sha256 written

    def refresh(self) -> int:
        """Downloads what is new or changed; how many files were written."""
        written = 0
        for exp_id in self.experiment_ids:
            chosen = self.only_trials.get(exp_id)
            listed = (
                tensorboard.list_files(self.store, exp_id)
                if chosen is None
                else [f for t in sorted(chosen) for f in tensorboard.list_files(self.store, exp_id, t)]
            )
            for f in listed:
                key = (exp_id, f.trial_id, f.path)
                if self._have.get(key) == f.sha256:
                    continue
                target = files_dir(self.logdir, exp_id, f.trial_id) / validate_relpath(f.path)
                tensorboard.download(self.store, exp_id, f, target)
                self._have[key] = f.sha256
                written += 1
        return written
