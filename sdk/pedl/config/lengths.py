"""Training lengths written in batches, records, epochs or (old PEDL) steps, converted to batches.

Records and epochs convert only when the global batch size is known (a const
`hyperparameters.global_batch_size`); epochs also need top-level `records_per_epoch`.
A partial final batch counts as a batch (records are rounded up to whole batches).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pedl.config._checks import describe, expect_int, is_int
from pedl.config.errors import FieldError, FieldPath

LENGTH_UNITS = ("batches", "records", "epochs")


@dataclass(frozen=True)
class LengthContext:
    batches_per_step: int
    global_batch_size: int | None
    records_per_epoch: int | None


def validate_length(value: Any, path: FieldPath, *, allow_zero: bool = False) -> None:
    """Check the form only: a bare int (batches) or a one-key mapping `{batches|records|epochs: N}`."""
    minimum = 0 if allow_zero else 1
    if is_int(value):
        expect_int(value, path, minimum=minimum)
        return
    if not isinstance(value, dict):
        raise FieldError(
            path,
            f"expected {{batches: N}}, {{records: N}}, {{epochs: N}} or an integer, got {describe(value)}",
        )
    if len(value) != 1 or next(iter(value)) not in LENGTH_UNITS:
        keys = ", ".join(str(k) for k in value) or "nothing"
        raise FieldError(path, f"expected exactly one of batches, records or epochs; got {keys}")
    unit, amount = next(iter(value.items()))
    expect_int(amount, (*path, unit), minimum=minimum)


def length_to_batches(value: Any, path: FieldPath, ctx: LengthContext, *, allow_zero: bool = False) -> int:
    validate_length(value, path, allow_zero=allow_zero)
    if is_int(value):
        return value
    unit, amount = next(iter(value.items()))
    if unit == "batches":
        return amount
    if unit == "epochs":
        if not ctx.records_per_epoch:
            raise FieldError(
                (*path, unit),
                "a length in epochs needs top-level 'records_per_epoch': pedl converts lengths to batches "
                "when the experiment is created and does not measure the training data loader",
            )
        records = amount * ctx.records_per_epoch
    else:
        records = amount
    if ctx.global_batch_size is None:
        raise FieldError(
            (*path, unit),
            f"a length in {unit} needs a constant 'hyperparameters.global_batch_size': pedl converts lengths "
            "to batches when the experiment is created; make global_batch_size a const or write {batches: N}",
        )
    batches = -(-records // ctx.global_batch_size)
    if batches == 0 and not allow_zero:
        raise FieldError((*path, unit), "is less than one batch")
    return batches


def steps_to_batches(value: Any, path: FieldPath, ctx: LengthContext) -> int:
    """Old PEDL lengths (`max_steps`, `target_trial_steps`, ...) count steps of `batches_per_step`."""
    return expect_int(value, path, minimum=1) * ctx.batches_per_step
