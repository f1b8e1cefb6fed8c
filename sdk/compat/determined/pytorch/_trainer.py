"""`det.pytorch.init()` and `det.pytorch.Trainer(trial, context).fit(...)` for training scripts.

The Trainer drives the same controller the harness uses (`controller_for`): `fit` trains to
`max_length`, validates every `validation_period`, checkpoints every `checkpoint_period` and after
the validations `checkpoint_policy` picks, and reports training every `reporting_period`. Off a
cluster its metrics are printed and its checkpoints written into `checkpoint_dir` (one directory per
checkpoint, named by batches trained), so a script resumes exactly with `latest_checkpoint=` (a
path). Run as a pedl trial (Determined's tutorial script as an experiment's entrypoint), it reports
as Determined's does, through the Core API: training and validation metrics to the scheduler,
checkpoints (also one at the end) to the experiment's storage, `latest_checkpoint` a storage id
(`det.get_cluster_info().latest_checkpoint`), and a preemption checkpoints and stops.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch
import torch.distributed

from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._data import to_batches
from determined.pytorch._fit import DEFAULT_REPORTING_PERIOD, CheckpointPolicy, fit_options
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
    """A PyTorchTrialContext for a training script; inside a pedl trial, its hparams and config.
    On several slots (one process each, torchrun's environment) it joins their process group first,
    as Determined's does, so that the Trainer shards data and averages gradients over them."""
    setup = script_setup("det.pytorch.init()", hparams, exp_conf, seed, unsupported)
    join_process_group(lambda backend: torch.distributed.init_process_group(backend))
    yield PyTorchTrialContext(*setup)


def join_process_group(start: Callable[[str], None]) -> None:
    """Starts the slots' process group with `start(backend)` (NCCL on GPUs, else gloo) when this is
    one of several processes and none is started yet."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or torch.distributed.is_initialized():
        return
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    start(backend)


def script_setup(
    what: str,
    hparams: dict[str, Any] | None,
    exp_conf: dict[str, Any] | None,
    seed: int | None,
    unsupported: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(hparams, experiment config) of a training script's `init()`, its RNGs seeded: the trial's
    own inside a pedl trial, else the arguments (or empty)."""
    from determined import _cluster_info

    # Determined's default (True) is what pedl always does: the trial's TensorBoard files are uploaded.
    if unsupported.pop("enable_tensorboard_logging", True) is not True:
        raise TypeError(
            f"{what}: enable_tensorboard_logging=False is not supported: pedl always uploads the "
            "TensorBoard files a trial writes"
        )
    if unsupported:
        raise TypeError(f"{what}: pedl does not support the argument(s) {', '.join(sorted(unsupported))}")
    info = _cluster_info.get_cluster_info()  # a script's trial (its process holds no trial context)
    try:
        config = exp_conf if exp_conf is not None else _trial_context.get_experiment_config()
    except RuntimeError:
        config = dict(info.trial.config) if info is not None else {}
    if hparams is None:
        hparams = dict(_trial_context._hparams or (info.trial.hparams if info is not None else {}))
    if seed is None:
        try:
            seed = _trial_context.get_trial_seed()
        except RuntimeError:
            seed = 0
    seed_all(seed)
    _trial_context.set_hyperparameters(hparams)
    return hparams, config


class Trainer:
    def __init__(self, trial: Any, context: PyTorchTrialContext | None = None) -> None:
        self.trial = trial
        self.context = context if context is not None else trial.context
        self._controller = self._controller_for(trial, self.context)

    def _controller_for(self, trial: Any, context: Any) -> Any:
        """The controller that trains `trial`: pedl's PyTorch loop (DeepSpeed's Trainer: its own)."""
        from determined.pytorch._trial import controller_for

        return controller_for(trial, context)

    def _batches_per_epoch(self) -> int:
        return len(self._controller.training_loader)

    def fit(
        self,
        max_length: Any = None,
        validation_period: Any | None = None,
        checkpoint_period: Any | None = None,
        latest_checkpoint: str | Path | None = None,
        checkpoint_dir: str | Path = "checkpoints",
        test_mode: bool = False,
        reporting_period: Any = DEFAULT_REPORTING_PERIOD,
        checkpoint_policy: str = "best",
        step_zero_validation: bool = False,
        profiling_enabled: bool = False,
    ) -> list[dict[str, Any]]:
        """Trains to `max_length` (on a cluster, None: the searcher's lengths, as Determined 0.23 to
        0.34's tutorial asks); returns the validation metrics, one dict per validation. Training
        metrics are reported every `reporting_period` and at each validation or checkpoint; a
        checkpoint follows a validation as `checkpoint_policy` says; `test_mode` trains one batch,
        validates and checkpoints (off a cluster only)."""
        controller = self._controller
        per_epoch = self._batches_per_epoch()
        validate_every = (
            to_batches(validation_period, per_epoch, "validation_period") if validation_period else 0
        )
        save_every = to_batches(checkpoint_period, per_epoch, "checkpoint_period") if checkpoint_period else 0
        with _reports(Path(checkpoint_dir)) as reports:
            options = fit_options(
                reporting_period=reporting_period,
                checkpoint_policy=checkpoint_policy,
                step_zero_validation=step_zero_validation,
                test_mode=test_mode,
                profiling_enabled=profiling_enabled,
                batches_per_epoch=per_epoch,
                on_cluster=reports.on_cluster,
            )
            if latest_checkpoint is not None:
                with reports.restore(str(latest_checkpoint)) as path:
                    controller.load(path)
            config = self.context.get_experiment_config()
            policy = CheckpointPolicy(options.checkpoint_policy, lambda: _searcher(config))
            loop = _Loop(controller, reports, validate_every, save_every, options.report_every, policy)
            if options.step_zero_validation and controller.batches_trained == 0:
                loop.validate()
            if max_length is None and not test_mode:
                if not isinstance(reports, _TrialReports):
                    raise TypeError(
                        "Trainer.fit(): max_length is required off a cluster (Batch(n) or Epoch(n))"
                    )
                metric = _searcher(config)[0]
                searcher = reports.core.searcher
                unit = searcher.get_configured_units()
                for op in searcher.operations():
                    target = _searcher_batches(op.length, unit, per_epoch, controller.training_loader)
                    loop.train_to(target)
                    validated = loop.validation_at(target)
                    if reports.is_chief:
                        op.report_completed(validated[metric])
                    if loop.preempted:
                        break
            else:
                loop.train_to(1 if test_mode else to_batches(max_length, per_epoch, "max_length"))
            if reports.on_cluster and loop.saved != controller.batches_trained:
                with reports.store(controller.batches_trained) as target_dir:
                    controller.save(target_dir)
        return loop.results


def _searcher(config: dict[str, Any]) -> tuple[str, bool]:
    """(searcher.metric, searcher.smaller_is_better) of the trial's experiment config (the
    context's, else the cluster info's)."""
    from determined import _cluster_info

    info = _cluster_info.get_cluster_info()
    for source in (config, info.trial.config if info is not None else {}):
        searcher = source.get("searcher") if isinstance(source, dict) else None
        if isinstance(searcher, dict) and searcher.get("metric"):
            return str(searcher["metric"]), bool(searcher.get("smaller_is_better", True))
    raise ValueError("Trainer.fit(): the experiment config names no searcher.metric")


def _searcher_batches(length: int, unit: Any, per_epoch: int, loader: Any) -> int:
    """A searcher operation's length (in its configured unit) in batches."""
    name = getattr(unit, "value", "batches")
    if name == "epochs":
        return int(length) * per_epoch
    if name == "records":
        return -(-int(length) // int(getattr(loader, "batch_size", None) or 1))
    return int(length)


class _Loop:
    """Training to a target: training reports every `report_every` batches, validations every
    `validate_every` and at the target, checkpoints every `save_every`, after the validations
    `policy` picks, and at the target (or when preempted)."""

    def __init__(
        self,
        controller: Any,
        reports: Any,
        validate_every: int,
        save_every: int,
        report_every: int,
        policy: CheckpointPolicy,
    ) -> None:
        self.controller = controller
        self.reports = reports
        self.validate_every = validate_every
        self.save_every = save_every
        self.report_every = report_every
        self.policy = policy
        self.results: list[dict[str, Any]] = []
        self.validated_at = -1
        self.saved = -1
        self.preempted = False

    def train_to(self, total: int) -> None:
        controller, reports = self.controller, self.reports
        periods = (self.validate_every, self.save_every, self.report_every)
        while controller.batches_trained < total and not self.preempted:
            done = controller.batches_trained
            step = controller.train_until(min([total] + [done + p - done % p for p in periods if p]))
            trained = controller.batches_trained
            reports.training(trained, self._with_progress(step.metrics), trained / total)
            last = trained == total
            if last or (self.validate_every and trained % self.validate_every == 0):
                self.validate()
            self.preempted = reports.should_preempt()
            if last or self.preempted or (self.save_every and trained % self.save_every == 0):
                self._save()

    def _save(self) -> None:
        trained = self.controller.batches_trained
        if self.saved == trained:
            return
        with self.reports.store(trained) as target:
            self.controller.save(target)
        self.saved = trained

    def _with_progress(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """`metrics` with `batches` and `epochs` (completed) added unless the trial reports its own:
        Determined's training loops report both since 0.38, so that `searcher.time_metric: batches`
        (or `epochs`) measures a trial as Determined's docs write it."""
        controller = self.controller
        return {"batches": controller.batches_trained, "epochs": controller._stream.epoch, **metrics}

    def validate(self) -> dict[str, Any]:
        """Validates now, reports it and checkpoints if the policy says so (every rank agrees; not
        after a validation of the untrained model, as in Determined)."""
        self.results.append(self._with_progress(self.controller.validate()))
        self.validated_at = self.controller.batches_trained
        self.reports.validation(self.validated_at, self.results[-1])
        decided = self.policy.after(self.results[-1]) if self.reports.is_chief else False
        if _chiefs_answer(decided) and self.validated_at > 0:
            self._save()
        return self.results[-1]

    def validation_at(self, batches: int) -> dict[str, Any]:
        """The validation metrics at `batches` (validating now if the last validation was earlier)."""
        if self.validated_at == self.controller.batches_trained == batches and self.results:
            return self.results[-1]
        return self.validate()


def _chiefs_answer(answer: bool) -> bool:
    """Rank 0's `answer` on every rank of the slots' process group (itself when there is none)."""
    if not torch.distributed.is_initialized() or torch.distributed.get_world_size() <= 1:
        return answer
    shared = [answer]
    torch.distributed.broadcast_object_list(shared, src=0)
    return bool(shared[0])


class _LocalReports:
    """Off a cluster: metrics printed as JSON lines, checkpoints under `checkpoint_dir`."""

    on_cluster = False
    is_chief = True

    def __init__(self, checkpoints: Path) -> None:
        self.checkpoints = checkpoints

    def training(self, batches: int, metrics: dict[str, Any], progress: float) -> None:
        print(json.dumps({"batches_trained": batches, "training": metrics}), flush=True)

    def validation(self, batches: int, metrics: dict[str, Any]) -> None:
        print(json.dumps({"batches_trained": batches, "validation": metrics}), flush=True)

    def should_preempt(self) -> bool:
        return False

    @contextlib.contextmanager
    def store(self, batches: int) -> Iterator[Path]:
        target = self.checkpoints / f"batches-{batches}"
        target.mkdir(parents=True, exist_ok=True)
        yield target

    def restore(self, checkpoint: str) -> AbstractContextManager[Path]:
        return contextlib.nullcontext(Path(checkpoint))


class _TrialReports:
    """In a pedl trial: through the Core API, as Determined's Trainer reports. On several slots
    every rank trains and saves (a DeepSpeed save is collective) and the chief reports and stores:
    a worker's checkpoint files go to a scratch directory (its controller hands the chief what
    the checkpoint needs)."""

    on_cluster = True

    def __init__(self, core: Any) -> None:
        self.core = core
        self.is_chief = core.distributed.rank == 0

    def training(self, batches: int, metrics: dict[str, Any], progress: float) -> None:
        if self.is_chief:
            self.core.train.report_training_metrics(steps_completed=batches, metrics=metrics)
            self.core.train.report_progress(min(progress, 1.0))

    def validation(self, batches: int, metrics: dict[str, Any]) -> None:
        if self.is_chief:
            self.core.train.report_validation_metrics(steps_completed=batches, metrics=metrics)

    def should_preempt(self) -> bool:
        return bool(self.core.preempt.should_preempt())

    @contextlib.contextmanager
    def store(self, batches: int) -> Iterator[Path]:
        if not self.is_chief:
            with tempfile.TemporaryDirectory(prefix="det-worker-checkpoint-") as scratch:
                yield Path(scratch)
            return
        with self.core.checkpoint.store_path({"steps_completed": batches}) as (path, _storage_id):
            yield Path(path)

    def restore(self, checkpoint: str) -> AbstractContextManager[Path]:
        restored: AbstractContextManager[Path] = self.core.checkpoint.restore_path(checkpoint)
        return restored


@contextlib.contextmanager
def _reports(checkpoints: Path) -> Iterator[_LocalReports | _TrialReports]:
    from determined import core
    from determined.core._link import harness_link

    if harness_link() is None:
        yield _LocalReports(checkpoints)
        return
    several = int(os.environ.get("WORLD_SIZE", "1")) > 1
    ranks = core.DistributedContext.from_torch_distributed() if several else None
    with core.init(distributed=ranks) as context:
        yield _TrialReports(context)
