"""The `searcher` section: which search runs, on what metric, for how long.

Accepts Determined's fields (`max_length`, `budget`, `length_per_round`) and the older PEDL ones
(`max_steps`, `target_trial_steps`, `step_budget`, `steps_per_round`, counted in steps of
`batches_per_step`). Defaults follow Determined's documentation.
"""

from __future__ import annotations

from typing import Any

from pedl.config.errors import FieldError, FieldPath
from pedl.config.lengths import Length, LengthContext, resolve_length, steps_to_batches
from pedl.config.schema_searcher import MODES, SEARCHER_NAMES

__all__ = ["MODES", "SEARCHER_NAMES", "check_searcher_for_entrypoint", "searcher_budget", "validate_searcher"]

# Length fields per searcher: (field, in steps?) — exactly one must be given.
_LENGTH_FIELDS: dict[str, tuple[tuple[str, bool], ...]] = {
    "adaptive": (("max_length", False), ("max_steps", True), ("target_trial_steps", True)),
    "pbt": (("length_per_round", False), ("steps_per_round", True)),
}
_DEFAULT_LENGTH_FIELDS = (("max_length", False), ("max_steps", True))
# The time_metric values a Trial class can be measured in: pedl counts them itself.
TRIAL_TIME_METRICS = ("batches", "epochs")
# Searchers whose trials may go without a length: a Core API script decides when it is done.
_LENGTH_OPTIONAL = ("single", "random", "grid")
_DEFAULTS: dict[str, dict[str, Any]] = {
    "random": {"max_concurrent_trials": 16},
    "grid": {"max_concurrent_trials": 16},
    "adaptive_asha": {
        "mode": "standard",
        "divisor": 4,
        "max_rungs": 5,
        "stop_once": False,
        "max_concurrent_trials": 16,
    },
    "adaptive_simple": {"mode": "standard", "divisor": 4, "max_rungs": 5},
    "async_halving": {"divisor": 4, "stop_once": False, "max_concurrent_trials": 16},
    "adaptive": {"mode": "standard", "divisor": 4, "max_rungs": 5, "train_stragglers": True},
}


def validate_searcher(
    value: Any, ctx: LengthContext, path: FieldPath = ("searcher",)
) -> tuple[dict[str, Any], Length]:
    """Return (searcher with defaults filled, trial length): in batches, or in records or epochs
    when only each trial can convert it (the searcher then counts in that unit).

    For pbt the length is one round's training; for adaptive it is the target trial length.
    """
    searcher = dict(value)  # its shape is checked by the schema (pedl.config.schema_searcher)
    name = searcher["name"]
    searcher.setdefault("smaller_is_better", True)
    for key, default in _DEFAULTS.get(name, {}).items():
        searcher.setdefault(key, default)
    length = _length(searcher, name, path, ctx)
    if name == "async_halving":
        _check_async_halving(searcher, path, length)
    if name == "adaptive":
        _adaptive_budget(searcher, path, ctx, length.unit)
    return searcher, length


def searcher_budget(
    searcher: dict[str, Any], ctx: LengthContext, path: FieldPath = ("searcher",)
) -> Length | None:
    """The adaptive searcher's total budget (`budget` or old `step_budget`), else None."""
    if "budget" in searcher:
        return resolve_length(searcher["budget"], (*path, "budget"), ctx)
    if "step_budget" in searcher:
        return Length(steps_to_batches(searcher["step_budget"], (*path, "step_budget"), ctx))
    return None


def _length(searcher: dict[str, Any], name: str, path: FieldPath, ctx: LengthContext) -> Length:
    """The trial length; 0 batches for a searcher without one (the trial's script decides)."""
    if name == "adaptive_asha" and ("time_metric" in searcher or "max_time" in searcher):
        return _time_length(searcher, path, ctx)
    fields = _LENGTH_FIELDS.get(name, _DEFAULT_LENGTH_FIELDS)
    given = [(f, in_steps) for f, in_steps in fields if f in searcher]
    if not given and name in _LENGTH_OPTIONAL:
        return Length(0)
    if not given:
        options = " or ".join(f for f, _ in fields)
        if name == "adaptive_asha":
            options += ", or time_metric and max_time for a Core API script"
        raise FieldError((*path, fields[0][0]), f"is required for the {name} searcher (give {options})")
    if len(given) > 1:
        raise FieldError((*path, given[1][0]), f"give only one of {', '.join(f for f, _ in given)}")
    field, in_steps = given[0]
    if in_steps:
        return Length(steps_to_batches(searcher[field], (*path, field), ctx))
    return resolve_length(searcher[field], (*path, field), ctx)


def _time_length(searcher: dict[str, Any], path: FieldPath, ctx: LengthContext) -> Length:
    """Determined's ASHA on a metric the trial reports (`time_metric`) up to `max_time` of it. A
    Trial class's `batches` and `epochs` (what Determined's training loops report) are the length
    in that unit, which pedl counts itself; a script's metric counts as it reports it."""
    for key in ("time_metric", "max_time"):
        if key not in searcher:
            other = "max_time" if key == "time_metric" else "time_metric"
            raise FieldError((*path, key), f"is required with searcher.{other}")
    for key in ("max_length", "max_steps"):
        if key in searcher:
            raise FieldError((*path, key), "give either time_metric and max_time, or a length, not both")
    amount = int(searcher["max_time"])
    if not ctx.command and searcher["time_metric"] in TRIAL_TIME_METRICS:
        return resolve_length({searcher["time_metric"]: amount}, (*path, "max_time"), ctx)
    return Length(amount)


def check_searcher_for_entrypoint(
    searcher: dict[str, Any],
    length: int,
    command: bool,
    min_checkpoint_period: int,
    path: FieldPath = ("searcher",),
) -> None:
    """What a searcher asks of a trial that only a Core API script (a command entrypoint), or only a
    Trial class, can give."""
    name = searcher["name"]
    if not command:
        if "time_metric" in searcher and searcher["time_metric"] not in TRIAL_TIME_METRICS:
            raise FieldError(
                (*path, "time_metric"),
                f"a Trial class is measured in {' or '.join(TRIAL_TIME_METRICS)}; another metric needs "
                "a command entrypoint (a Core API script that reports it in its validation metrics)",
            )
        if length == 0:
            raise FieldError(
                (*path, "max_length"),
                f"is required for the {name} searcher unless the entrypoint is a command (a Core API "
                "script, which decides when it is done)",
            )
        return
    if name in ("pbt", "adaptive", "adaptive_simple"):
        raise FieldError(
            (*path, "name"),
            f"the {name} searcher needs checkpoints on request, which a command entrypoint (a Core API "
            "script that checkpoints when it chooses) cannot give; use single, random, grid or adaptive_asha",
        )
    if min_checkpoint_period:
        raise FieldError(
            ("min_checkpoint_period",),
            "is not available with a command entrypoint: the script checkpoints itself "
            "(core_context.checkpoint.store_path)",
        )


def _adaptive_budget(searcher: dict[str, Any], path: FieldPath, ctx: LengthContext, unit: str) -> None:
    if "budget" in searcher and "step_budget" in searcher:
        raise FieldError((*path, "step_budget"), "give only one of budget, step_budget")
    budget = searcher_budget(searcher, ctx, path)
    if budget is None:
        raise FieldError(
            (*path, "budget"), "is required for the adaptive searcher (give budget or step_budget)"
        )
    if budget.unit != unit:
        raise FieldError(
            (*path, "budget"),
            f"counts {budget.unit} but max_length counts {unit}; write both in the same unit",
        )


def _check_async_halving(searcher: dict[str, Any], path: FieldPath, length: Length) -> None:
    """One bracket: the first rung, max_length / divisor^(num_rungs-1), must be at least one unit."""
    first = length.amount / searcher["divisor"] ** (searcher["num_rungs"] - 1)
    unit = {"batches": "batch", "records": "record", "epochs": "epoch"}[length.unit]
    if first < 1:
        raise FieldError(
            (*path, "num_rungs"),
            f"{searcher['num_rungs']} rungs with divisor {searcher['divisor']} put the first rung below one "
            f"{unit} of max_length ({length.amount} {length.unit}); use fewer rungs or a longer max_length",
        )
