"""`det.pytorch.init()` and `det.pytorch.Trainer(trial, context).fit(...)` for training scripts.

The Trainer drives the same controller the harness uses (`controller_for`): `fit` trains to
`max_length`, validates every `validation_period` and checkpoints every `checkpoint_period` into
`checkpoint_dir` (one directory per checkpoint, named by batches trained), so a script resumes
exactly with `latest_checkpoint=`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._data import to_batches
from pedl import _trial_context
from pedl.harness.build import seed_all


@contextlib.contextmanager
def init(
    *,
    hparams: dict[str, Any] | None = None,
    exp_conf: dict[str, Any] | None = None,
    seed: int | None = None,
    **unsupported: Any,
) -> Iterator[PyTorchTrialContext]:
    """A PyTorchTrialContext for a training script; inside a pedl trial, its hparams and config."""
    if unsupported:
        raise TypeError(
            f"det.pytorch.init(): pedl does not support the argument(s) {', '.join(sorted(unsupported))}"
        )
    try:
        config = exp_conf if exp_conf is not None else _trial_context.get_experiment_config()
    except RuntimeError:
        config = {}
    if hparams is None:
        hparams = dict(_trial_context._hparams or {})
    if seed is None:
        try:
            seed = _trial_context.get_trial_seed()
        except RuntimeError:
            seed = 0
    seed_all(seed)
    _trial_context.set_hyperparameters(hparams)
    yield PyTorchTrialContext(hparams, config)


class Trainer:
    def __init__(self, trial: Any, context: PyTorchTrialContext | None = None) -> None:
        from determined.pytorch._trial import controller_for

        self.trial = trial
        self.context = context if context is not None else trial.context
        self._controller = controller_for(trial, self.context)

    def fit(
        self,
        max_length: Any,
        validation_period: Any | None = None,
        checkpoint_period: Any | None = None,
        latest_checkpoint: str | Path | None = None,
        checkpoint_dir: str | Path = "checkpoints",
        test_mode: bool = False,
        **unsupported: Any,
    ) -> list[dict[str, Any]]:
        """Trains to `max_length`; returns the validation metrics, one dict per validation."""
        if unsupported:
            raise TypeError(
                f"Trainer.fit(): pedl does not support the argument(s) {', '.join(sorted(unsupported))}"
            )
        controller = self._controller
        per_epoch = len(controller.training_loader)
        total = 2 if test_mode else to_batches(max_length, per_epoch, "max_length")
        validate_every = (
            to_batches(validation_period, per_epoch, "validation_period") if validation_period else 0
        )
        save_every = to_batches(checkpoint_period, per_epoch, "checkpoint_period") if checkpoint_period else 0
        if latest_checkpoint is not None:
            controller.load(Path(latest_checkpoint))
        checkpoints = Path(checkpoint_dir)
        results: list[dict[str, Any]] = []
        while controller.batches_trained < total:
            done = controller.batches_trained
            targets = [total] + [done + p - done % p for p in (validate_every, save_every) if p]
            step = controller.train_until(min(targets))
            print(
                json.dumps({"batches_trained": controller.batches_trained, "training": step.metrics}),
                flush=True,
            )
            last = controller.batches_trained == total
            if last or (validate_every and controller.batches_trained % validate_every == 0):
                results.append(controller.validate())
                print(
                    json.dumps({"batches_trained": controller.batches_trained, "validation": results[-1]}),
                    flush=True,
                )
            if last or (save_every and controller.batches_trained % save_every == 0):
                target = checkpoints / f"batches-{controller.batches_trained}"
                target.mkdir(parents=True, exist_ok=True)
                controller.save(target)
        return results
