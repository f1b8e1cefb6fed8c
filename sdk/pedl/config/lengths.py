"""Training lengths written in batches, records, epochs or (old PEDL) steps, and their conversion to batches.

A length converts to batches when the experiment is created where the config alone decides it:
records with a const `hyperparameters.global_batch_size`, epochs with that and `records_per_epoch`
(Determined deprecates `records_per_epoch` but honours it). Otherwise the length keeps its unit and
each trial converts it (`TrialLengths`): records by the trial's own `global_batch_size`, epochs by
`records_per_epoch` and that batch size, or else, as Determined does since 0.2x, by the length of the
chief's training data loader, which the harness reports when the trial starts. A Core API script
(a command entrypoint) gets every length as written and counts in its unit itself, as Determined's
scripts do (`get_configured_units`).
A partial final batch counts as a batch (records are rounded up to whole batches).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pedl.config._checks import is_int
from pedl.config.errors import FieldError, FieldPath

LENGTH_UNITS = ("batches", "records", "epochs")
EPOCHS_NEED = (
    "a length in epochs needs the training data loader's length, which only PyTorch trials report; "
    "give top-level records_per_epoch (with a global_batch_size hyperparameter) or write {batches: N}"
)


@dataclass(frozen=True)
class LengthContext:
    batches_per_step: int
    # A const `hyperparameters.global_batch_size`, else None.
    global_batch_size: int | None
    records_per_epoch: int | None
    # Each trial has an integer `global_batch_size` (const, int or categorical of integers).
    batch_size_per_trial: bool = False
    # A Core API script: a length it gets that pedl cannot convert counts in the config's unit.
    command: bool = False


@dataclass(frozen=True)
class Length:
    """A length as the searcher and the trial's sequencer count it: batches, or a unit left to the trial."""

    amount: int
    unit: str = "batches"


def resolve_length(value: Any, path: FieldPath, ctx: LengthContext, *, allow_zero: bool = False) -> Length:
    """The length in batches where the config decides it, else in its own unit for each trial to convert.

    Its form (an integer, or one of batches/records/epochs) and bounds are the schema's
    (`schema_parts.length`)."""
    if is_int(value):
        return Length(value)
    unit, amount = next(iter(value.items()))
    if unit == "batches" or ctx.command:
        # A Core API script counts in the unit as written (Determined hands it the length unchanged).
        return Length(amount)
    if unit == "records" and ctx.global_batch_size is None and not ctx.batch_size_per_trial:
        raise FieldError(
            (*path, unit),
            "a length in records needs an integer 'hyperparameters.global_batch_size' (const, int or "
            "categorical) to count batches by; add one or write {batches: N}",
        )
    if ctx.global_batch_size is not None and (unit == "records" or ctx.records_per_epoch):
        records = amount * ctx.records_per_epoch if unit == "epochs" else amount
        batches = -(-records // ctx.global_batch_size)
        if batches == 0 and not allow_zero:
            raise FieldError((*path, unit), "is less than one batch")
        return Length(batches)
    return Length(amount, unit)


def steps_to_batches(value: Any, path: FieldPath, ctx: LengthContext) -> int:
    """Old PEDL lengths (`max_steps`, `target_trial_steps`, ...) count steps of `batches_per_step`."""
    return int(value) * ctx.batches_per_step


@dataclass(frozen=True)
class TrialLengths:
    """How one trial turns lengths in records or epochs into batches.

    `epoch_batches` is the trial's epoch in batches: from `records_per_epoch` and its batch size, or
    0 until the harness reported its training data loader's length."""

    global_batch_size: int = 0
    records_per_epoch: int = 0
    epoch_batches: int = 0

    def known(self, unit: str) -> bool:
        if unit == "records":
            return self.global_batch_size > 0
        if unit == "epochs":
            return self.epoch_batches > 0 or (self.records_per_epoch > 0 and self.global_batch_size > 0)
        return True

    def to_batches(self, amount: int, unit: str) -> int:
        if unit == "batches":
            return amount
        if not self.known(unit):
            raise ValueError(f"a length in {unit} cannot be counted in batches before {EPOCHS_NEED}")
        if unit == "records":
            return -(-amount // self.global_batch_size)
        if self.records_per_epoch and self.global_batch_size:
            return -(-amount * self.records_per_epoch // self.global_batch_size)
        return amount * self.epoch_batches


def trial_batch_size(hparams: dict[str, Any]) -> int:
    """The trial's `global_batch_size` hyperparameter as an integer, 0 where it has none."""
    value = hparams.get("global_batch_size")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 1:
        return 0
    return int(value)
