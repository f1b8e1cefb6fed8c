"""Trainer.fit's arguments beyond the lengths (Determined 0.38's `reporting_period`,
`checkpoint_policy`, `step_zero_validation`, `test_mode`, `profiling_enabled`), checked once, and
the checkpoint policy that decides which validations a checkpoint follows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from determined.pytorch._data import Batch, to_batches

POLICIES = ("best", "all", "none")
DEFAULT_REPORTING_PERIOD = Batch(100)  # Determined's default


@dataclass(frozen=True)
class FitOptions:
    report_every: int  # batches between training reports (and searcher progress)
    checkpoint_policy: str  # "best", "all" or "none"; off a cluster "best" is "all", as in Determined
    step_zero_validation: bool
    test_mode: bool


def fit_options(
    *,
    reporting_period: Any,
    checkpoint_policy: Any,
    step_zero_validation: Any,
    test_mode: Any,
    profiling_enabled: Any,
    batches_per_epoch: int,
    on_cluster: bool,
) -> FitOptions:
    """The checked options; a bad value raises one error naming its argument."""
    for name, flag in (
        ("step_zero_validation", step_zero_validation),
        ("test_mode", test_mode),
        ("profiling_enabled", profiling_enabled),
    ):
        if not isinstance(flag, bool):
            raise TypeError(f"Trainer.fit(): {name} must be True or False, got {flag!r}")
    if profiling_enabled:
        raise ValueError(
            "Trainer.fit(): profiling_enabled=True is not supported: pedl has no profiler (leave it False)"
        )
    if checkpoint_policy not in POLICIES:
        raise ValueError(
            f"Trainer.fit(): checkpoint_policy must be 'best', 'all' or 'none', got {checkpoint_policy!r}"
        )
    if test_mode and on_cluster:
        raise ValueError("Trainer.fit(): test_mode is only supported off a cluster (as in Determined)")
    report_every = to_batches(reporting_period, batches_per_epoch, "reporting_period")
    if report_every < 1:
        raise ValueError(
            f"Trainer.fit(): reporting_period must be at least one batch, got {reporting_period!r}"
        )
    return FitOptions(
        report_every=report_every,
        checkpoint_policy="all" if checkpoint_policy == "best" and not on_cluster else checkpoint_policy,
        step_zero_validation=step_zero_validation,
        test_mode=test_mode,
    )


class CheckpointPolicy:
    """Whether a checkpoint follows a validation: always ("all"), never ("none"), or when the
    searcher metric beats every earlier validation of this fit ("best"; Determined compares with
    the experiment's best, which a script's Core API in pedl does not report)."""

    def __init__(self, policy: str, searcher: Callable[[], tuple[str, bool]]) -> None:
        self.policy = policy
        self._searcher = searcher  # (metric, smaller_is_better), read when first needed
        self._best: float | None = None

    def after(self, metrics: dict[str, Any]) -> bool:
        if self.policy != "best":
            return self.policy == "all"
        name, smaller_is_better = self._searcher()
        if name not in metrics:
            raise ValueError(
                f"Trainer.fit(checkpoint_policy='best'): the searcher metric {name!r} is not among "
                f"the validation metrics ({', '.join(sorted(metrics))})"
            )
        value = float(metrics[name])
        best = self._best
        if best is not None and not (value < best if smaller_is_better else value > best):
            return False
        self._best = value
        return True
