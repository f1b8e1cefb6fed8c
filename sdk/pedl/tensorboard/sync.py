"""Keeping TensorBoard event files in step with the metrics the scheduler stores.

Each refresh asks the scheduler for the experiments' trials and appends only the steps and
validations not written yet, so a live experiment's curves grow while TensorBoard runs.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Protocol

from pedl._metrics import from_struct
from pedl.tensorboard.events import ScalarEventWriter, remove_pedl_event_files
from pedl.v1 import common_pb2, scheduler_pb2

TRAINING = "training"
VALIDATION = "validation"

_ENDED_EXPERIMENT = {
    common_pb2.EXPERIMENT_STATE_COMPLETED,
    common_pb2.EXPERIMENT_STATE_ERROR,
    common_pb2.EXPERIMENT_STATE_CANCELED,
}
_ENDED_TRIAL = {
    common_pb2.TRIAL_STATE_COMPLETED,
    common_pb2.TRIAL_STATE_ERROR,
    common_pb2.TRIAL_STATE_CANCELED,
}


class MetricsSource(Protocol):
    """What the sync needs from the scheduler (pedl.cli.client.SchedulerClient has it)."""

    def get_experiment(self, experiment_id: int) -> scheduler_pb2.GetExperimentResponse: ...

    def get_trial(self, trial_id: int) -> scheduler_pb2.GetTrialResponse: ...


def run_dir(logdir: Path, experiment_id: int, trial_id: int, kind: str) -> Path:
    return logdir / f"exp-{experiment_id}" / f"trial-{trial_id}" / kind


def _wall_time(timestamp: str) -> float:
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class MetricsSync:
    """Writes the experiments' metrics under `logdir`, replacing event files pedl wrote there before."""

    def __init__(
        self,
        source: MetricsSource,
        logdir: Path,
        experiment_ids: list[int],
        only_trials: dict[int, set[int]] | None = None,
    ) -> None:
        """`only_trials`: for an experiment named there, only those trials (`pedl tensorboard -t`)."""
        self.source = source
        self.logdir = logdir
        self.experiment_ids = list(dict.fromkeys(experiment_ids))
        self.only_trials = only_trials or {}
        self._writers: dict[tuple[int, str], ScalarEventWriter] = {}
        self._written: dict[tuple[int, str], set[int]] = {}
        self._finished_trials: set[int] = set()
        for exp_id in self.experiment_ids:
            remove_pedl_event_files(logdir / f"exp-{exp_id}")

    def refresh(self) -> bool:
        """Writes what is new; True once every experiment has ended and all of it is written."""
        done = True
        for exp_id in self.experiment_ids:
            response = self.source.get_experiment(exp_id)
            done = done and (
                response.experiment.state in _ENDED_EXPERIMENT
                or (exp_id in self.only_trials and self._chosen_ended(response, self.only_trials[exp_id]))
            )
            chosen = self.only_trials.get(exp_id)
            for trial in response.trials:
                if trial.id in self._finished_trials or (chosen is not None and trial.id not in chosen):
                    continue
                ended = trial.state in _ENDED_TRIAL  # read before the trial's metrics: none come after
                self._write_trial(exp_id, self.source.get_trial(trial.id))
                if ended:
                    self._finish(trial.id)
                else:
                    done = False
        for writer in self._writers.values():
            writer.flush()
        return done

    @staticmethod
    def _chosen_ended(response: scheduler_pb2.GetExperimentResponse, chosen: set[int]) -> bool:
        return all(t.state in _ENDED_TRIAL for t in response.trials if t.id in chosen)

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def _write_trial(self, exp_id: int, detail: scheduler_pb2.GetTrialResponse) -> None:
        trial_id = detail.trial.id
        for kind, results in ((TRAINING, detail.steps), (VALIDATION, detail.validations)):
            written = self._written.setdefault((trial_id, kind), set())
            for result in results:
                if result.total_batches in written:
                    continue
                writer = self._writers.get((trial_id, kind))
                if writer is None:
                    writer = ScalarEventWriter(run_dir(self.logdir, exp_id, trial_id, kind))
                    self._writers[(trial_id, kind)] = writer
                writer.add(result.total_batches, from_struct(result.metrics), _wall_time(result.end_time))
                written.add(result.total_batches)

    def _finish(self, trial_id: int) -> None:
        """An ended trial's files are complete: close them, so hundreds of trials hold no threads."""
        self._finished_trials.add(trial_id)
        for kind in (TRAINING, VALIDATION):
            writer = self._writers.pop((trial_id, kind), None)
            if writer is not None:
                writer.close()
