"""`experiment create --follow`: turns successive trial snapshots into one line per new event."""

from __future__ import annotations

from dataclasses import dataclass, field

from pedl._metrics import from_struct
from pedl.cli import render
from pedl.v1 import common_pb2, scheduler_pb2


def step_line(trial_id: int, step: scheduler_pb2.Step) -> str:
    metrics = render.format_metrics(from_struct(step.metrics))
    head = f"Trial {trial_id} step {step.step_id}: batches {step.total_batches} (+{step.num_batches})"
    return f"{head} {metrics}".rstrip()


def validation_line(trial_id: int, validation: scheduler_pb2.Validation) -> str:
    metrics = render.format_metrics(from_struct(validation.metrics))
    return f"Trial {trial_id} validation at batches {validation.total_batches}: {metrics}".rstrip()


def checkpoint_line(trial_id: int, checkpoint: common_pb2.Checkpoint) -> str:
    size = render.human_bytes(checkpoint.total_size or sum(f.size for f in checkpoint.files))
    return (
        f"Trial {trial_id} checkpoint {checkpoint.uuid} at batches {checkpoint.total_batches} "
        f"({len(checkpoint.files)} files, {size})"
    )


def trial_created_line(trial: scheduler_pb2.Trial) -> str:
    hparams = render.format_hparams(from_struct(trial.hparams))
    return f"Trial {trial.id} {render.trial_state(trial.state)}" + (f": {hparams}" if hparams else "")


def trial_state_line(trial: scheduler_pb2.Trial, previous: int) -> str:
    line = f"Trial {trial.id} {render.trial_state(previous)} -> {render.trial_state(trial.state)}"
    if trial.state in render.TERMINAL_TRIAL_STATES:
        line += f" after {trial.total_batches} batches"
    return line


def error_lines(response: scheduler_pb2.GetExperimentResponse) -> list[str]:
    """Why an experiment failed: its own error, then each failed trial's (often a stderr tail)."""
    lines = []
    if response.experiment.error:
        lines.append(f"Experiment {response.experiment.id} error: {response.experiment.error}")
    for trial in sorted(response.trials, key=lambda t: t.id):
        if trial.error:
            first, *rest = trial.error.rstrip().splitlines() or [""]
            lines.append(f"Trial {trial.id} error: {first}")
            lines.extend(f"    {r}".rstrip() for r in rest)
    return lines


def final_line(experiment: scheduler_pb2.Experiment) -> str:
    return f"Experiment {experiment.id} {render.experiment_state(experiment.state)}"


@dataclass
class _Seen:
    state: int
    restarts: int
    steps: set[int] = field(default_factory=set)
    validations: set[int] = field(default_factory=set)
    checkpoints: set[str] = field(default_factory=set)
    done: bool = False


class ProgressTracker:
    """Remembers what was already printed, so each poll prints only what is new."""

    def __init__(self) -> None:
        self._seen: dict[int, _Seen] = {}

    def needs_fetch(self, trial: scheduler_pb2.Trial) -> bool:
        """A trial already reported after it ended has nothing new."""
        seen = self._seen.get(trial.id)
        return seen is None or not seen.done

    def update(self, detail: scheduler_pb2.GetTrialResponse) -> list[str]:
        trial = detail.trial
        lines: list[str] = []
        seen = self._seen.get(trial.id)
        if seen is None:
            seen = self._seen[trial.id] = _Seen(state=trial.state, restarts=trial.restarts)
            lines.append(trial_created_line(trial))
        if trial.restarts > seen.restarts:
            lines.append(f"Trial {trial.id} restarted (restart {trial.restarts}, run {trial.run_id})")
            seen.restarts = trial.restarts

        events: list[tuple[int, int, str]] = []
        for step in detail.steps:
            if step.total_batches not in seen.steps:
                seen.steps.add(step.total_batches)
                events.append((step.total_batches, 0, step_line(trial.id, step)))
        for validation in detail.validations:
            if validation.total_batches not in seen.validations:
                seen.validations.add(validation.total_batches)
                events.append((validation.total_batches, 1, validation_line(trial.id, validation)))
        for checkpoint in detail.checkpoints:
            if checkpoint.uuid not in seen.checkpoints:
                seen.checkpoints.add(checkpoint.uuid)
                events.append((checkpoint.total_batches, 2, checkpoint_line(trial.id, checkpoint)))
        lines.extend(text for _, _, text in sorted(events))

        if trial.state != seen.state:
            lines.append(trial_state_line(trial, seen.state))
            seen.state = trial.state
        seen.done = trial.state in render.TERMINAL_TRIAL_STATES
        return lines
