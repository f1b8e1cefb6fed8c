"""`PyTorchTrial.evaluation_reducer()`: how each of evaluate_batch's metrics becomes one value over
the validation batches of every rank (Reducer.AVG, pedl's mean, unless it names SUM, MAX or MIN)."""

from __future__ import annotations

from typing import Any

from determined.pytorch._reducer import Reducer, _gather, reduce_values
from pedl.model_def.errors import describe

EVERY = "*"  # evaluation_reducer() returned one Reducer: it applies to every metric


def evaluation_reducers(trial: Any) -> dict[str, Reducer]:
    """{metric: Reducer} (or {EVERY: Reducer}) from the trial's evaluation_reducer(), if it has one."""
    method = getattr(trial, "evaluation_reducer", None)
    if method is None:
        return {}
    value = method()
    if isinstance(value, Reducer):
        return {EVERY: value}
    if isinstance(value, dict) and all(isinstance(r, Reducer) for r in value.values()):
        return {str(k): r for k, r in value.items()}
    raise TypeError(
        f"{describe(type(trial).evaluation_reducer)} must return a det.pytorch.Reducer or a dict of "
        f"metric name -> Reducer, got {value!r}"
    )


def reduced_per_batch(
    per_batch: list[dict[str, Any]], metrics: dict[str, Any], chosen: dict[str, Reducer]
) -> dict[str, Any]:
    """The metrics whose reducer is not AVG, reduced over every rank's batches."""
    batches = [b for rank in _gather(per_batch) for b in rank]
    out: dict[str, Any] = {}
    for name in metrics:
        reducer = chosen.get(name, chosen.get(EVERY, Reducer.AVG))
        if reducer is not Reducer.AVG:
            out[name] = reduce_values(reducer, [b[name] for b in batches if name in b])
    return out
