"""`pedl experiment create --local`: the whole experiment in this process, with progress printed."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from pedl.cli import render


def _print_event(event: tuple[Any, ...]) -> None:
    kind, trial = event[0], event[1]
    if kind == "step":
        print(
            f"Trial {trial.trial_id} step, batches {event[2]}: {render.format_metrics(event[3])}", flush=True
        )
    elif kind == "validation":
        print(
            f"Trial {trial.trial_id} validation, batches {event[2]}: {render.format_metrics(event[3])}",
            flush=True,
        )
    elif kind == "checkpoint":
        print(f"Trial {trial.trial_id} checkpoint {event[3]} at batches {event[2]}", flush=True)
    elif kind == "restored":
        print(f"Trial {trial.trial_id} checkpoint {event[2]} restored: validation metrics match", flush=True)
    elif kind == "trial_completed":
        print(f"Trial {trial.trial_id} COMPLETED", flush=True)


def run_local_experiment(config: Any, context: Path, verify_restore: bool) -> int:
    from pedl.experimental import run_local
    from pedl.harness.build import load_for_config

    with tempfile.TemporaryDirectory(prefix="pedl-local-") as tmp:
        model_dir = context
        if context.is_file():  # a single-file model definition
            model_dir = Path(tmp) / context.stem
            model_dir.mkdir()
            shutil.copy2(context, model_dir / context.name)
        model_def = load_for_config(model_dir.resolve(), config.raw)
        result = run_local(config, model_def, verify_restore=verify_restore, on_event=_print_event)
    best = result.best_trial(config.smaller_is_better)
    if best is not None:
        print(
            f"Best trial {best.trial_id}: {config.searcher_metric} = {best.best_validation:.6g}", flush=True
        )
    print(f"Experiment {result.state} (local)", flush=True)
    return 0 if result.state == "COMPLETED" else 1
