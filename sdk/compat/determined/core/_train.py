"""`core_context.train`: metrics and progress, as Determined documents them."""

from __future__ import annotations

import enum
import pathlib
from collections.abc import Callable
from typing import Any

from determined.core._distributed import DistributedContext
from determined.core._link import Link

TRAINING = "training"
VALIDATION = "validation"


class EarlyExitReason(enum.Enum):
    INVALID_HP = "EXITED_REASON_INVALID_HP"
    USER_REQUESTED_STOP = "EXITED_REASON_USER_REQUESTED_STOP"


def check_steps(steps_completed: Any, what: str) -> int:
    if isinstance(steps_completed, bool) or not isinstance(steps_completed, int) or steps_completed < 0:
        raise ValueError(f"{what}: steps_completed must be a non-negative int, got {steps_completed!r}")
    return steps_completed


def check_metrics(metrics: Any, what: str) -> dict[str, Any]:
    if not isinstance(metrics, dict):
        raise TypeError(f"{what}: metrics must be a dict of name to value, got {type(metrics).__name__}")
    for name in metrics:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{what}: metric names must be non-empty strings, got {name!r}")
    return {name: _plain(value, f"{what}: metric {name!r}") for name, value in metrics.items()}


def _plain(value: Any, what: str) -> Any:
    """Plain JSON values (numpy and torch scalars become floats, NaN and infinities kept)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, what) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v, what) for k, v in value.items()}
    item = getattr(value, "item", None)
    number = item() if callable(item) else value
    try:
        number = float(number)
    except (TypeError, ValueError):
        raise TypeError(
            f"{what} must be a number, string, list or dict, got {type(value).__name__}"
        ) from None
    return number  # NaN and infinities too: Determined stores them as reported


class TrainContext:
    """Reports what the script trained; only the chief (rank 0) reports, as in Determined."""

    def __init__(self, link: Link, dist: DistributedContext, manual_tensorboard: bool = False) -> None:
        self._link = link
        self._dist = dist
        self._manual_tensorboard = manual_tensorboard
        self._last: dict[str, int] = {}
        self._closed = False

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise RuntimeError(f"{what} called after the core context was closed (leave it inside `with`)")
        if self._dist.rank != 0:
            raise RuntimeError(
                f"{what} may only be called on the chief (rank 0); this is rank {self._dist.rank}"
            )

    def close(self) -> None:
        self._closed = True

    def report_metrics(self, group: str, steps_completed: int, metrics: dict[str, Any]) -> None:
        what = f"report_metrics({group!r})"
        if not isinstance(group, str) or not group:
            raise ValueError(f"report_metrics: group must be a non-empty string, got {group!r}")
        self._check_open(what)
        steps = check_steps(steps_completed, what)
        plain = check_metrics(metrics, what)
        last = self._last.get(group)
        if last is not None and steps <= last:
            raise ValueError(
                f"{what}: steps_completed must increase with each report; got {steps} after {last}"
            )
        self._link.call("report", group=group, steps_completed=steps, metrics=plain)
        self._last[group] = steps

    def report_training_metrics(
        self, steps_completed: int, metrics: dict[str, Any], batch_metrics: list[dict[str, Any]] | None = None
    ) -> None:
        if batch_metrics is not None:
            raise ValueError(
                "report_training_metrics: batch_metrics is not supported by pedl; report the "
                "per-batch values as metrics of their own steps_completed"
            )
        self.report_metrics(TRAINING, steps_completed, metrics)

    def report_validation_metrics(self, steps_completed: int, metrics: dict[str, Any]) -> None:
        self.report_metrics(VALIDATION, steps_completed, metrics)

    def report_progress(self, progress: float) -> None:
        self._check_open("report_progress")
        if isinstance(progress, bool) or not isinstance(progress, (int, float)) or not 0 <= progress <= 1:
            raise ValueError(f"report_progress: progress must be a number from 0 to 1, got {progress!r}")
        self._link.call("progress", progress=float(progress))

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        self._check_open("report_early_exit")
        if not isinstance(reason, EarlyExitReason):
            raise TypeError(f"report_early_exit: reason must be an EarlyExitReason, got {reason!r}")
        self._link.call("early_exit", reason=reason.value)

    def get_tensorboard_path(self) -> pathlib.Path:
        """The run's TensorBoard directory: what the script writes there is uploaded after each
        workload (TensorboardMode.AUTO) and shown by `pedl tensorboard EXPERIMENT_ID`."""
        from determined import tensorboard

        return tensorboard.get_base_path({})

    def upload_tensorboard_files(
        self,
        selector: Callable[[pathlib.Path], bool] = lambda _: True,
        mangler: Callable[[pathlib.Path, int], pathlib.Path] = lambda p, __: p,
    ) -> None:
        """TensorboardMode.MANUAL: uploads the files under the TensorBoard directory that `selector`
        accepts, each stored as `mangler(relative path, rank)`, on any rank."""
        if not self._manual_tensorboard:
            raise RuntimeError("upload_tensorboard_files can only be used in MANUAL mode")
        base = self.get_tensorboard_path()
        files = [
            [str(path), mangler(path.relative_to(base), self._dist.rank).as_posix()]
            for path in sorted(base.rglob("*"))
            if path.is_file() and selector(path)
        ]
        self._link.call("tensorboard_upload", files=files)
