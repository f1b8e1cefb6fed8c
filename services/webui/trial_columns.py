"""The experiment page's trials as columns (`/api/experiments/ID?columns=1`): one list per field
instead of one object per trial, so a 1,000-trial summary does not repeat every field's name (and
each hyperparameter's) 1,000 times. The page turns it back into rows (common.js `trialRows`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def columnar(trials: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`trials` (views.experiment_detail's rows, `hparams` flat) as
    {"count": n, "fields": {field: [value per trial]}, "hparams": {name: [value per trial]},
     "absent": {name: [index of each trial without that hyperparameter]}} ("absent" only lists
    names some trial lacks, so a null value and a missing one stay apart)."""
    fields: dict[str, list[Any]] = {}
    for name in trials[0] if trials else ():
        if name != "hparams":
            fields[name] = [t[name] for t in trials]
    names = sorted({name for t in trials for name in t["hparams"]})
    hparams: dict[str, list[Any]] = {name: [t["hparams"].get(name) for t in trials] for name in names}
    absent: dict[str, list[int]] = {}
    for name in names:
        missing = [i for i, t in enumerate(trials) if name not in t["hparams"]]
        if missing:
            absent[name] = missing
    return {"count": len(trials), "fields": fields, "hparams": hparams, "absent": absent}


def with_columns(detail: dict[str, Any]) -> dict[str, Any]:
    """The experiment page's data with its `trials` replaced by `trial_columns` (`columnar`)."""
    rest = {k: v for k, v in detail.items() if k != "trials"}
    return rest | {"trial_columns": columnar(detail["trials"])}
