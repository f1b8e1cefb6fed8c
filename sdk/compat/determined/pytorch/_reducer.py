"""Determined's custom metric reducers (`det.pytorch.MetricReducer`, `context.wrap_reducer`) and
`PyTorchTrial.evaluation_reducer()`'s per-metric reducers (`det.pytorch.Reducer`).

A wrapped reducer sees the batches of one training step (for_training) or of one validation pass
(for_validation): it is reset before, fed by the trial (`reducer.update(...)` or the trial's own
calls), and its value is `cross_slot_reduce([per_slot_reduce() of every rank])`, reported under
its name (or, unnamed, as the dict of metrics it returns).
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


class Reducer(enum.Enum):
    """How evaluate_batch's metric values over the validation batches become one value."""

    AVG = 1
    SUM = 2
    MAX = 3
    MIN = 4


def reduce_values(reducer: Reducer, values: list[Any]) -> Any:
    stacked = np.asarray([np.asarray(torch.as_tensor(v).detach().cpu(), dtype=np.float64) for v in values])
    if reducer is Reducer.AVG:
        out = stacked.mean(axis=0)
    elif reducer is Reducer.SUM:
        out = stacked.sum(axis=0)
    elif reducer is Reducer.MAX:
        out = stacked.max(axis=0)
    else:
        out = stacked.min(axis=0)
    return out.tolist() if out.ndim else float(out)


class MetricReducer(abc.ABC):
    """Subclass it for a metric that is not a mean over batches (Determined's interface)."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Forgets what it saw: called before each training step or validation pass."""

    @abc.abstractmethod
    def per_slot_reduce(self) -> Any:
        """This rank's intermediate value (picklable)."""

    @abc.abstractmethod
    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
        """Every rank's per_slot_reduce() value, in rank order -> the metric (or a dict of metrics)."""


class _SimpleReducer(MetricReducer):
    """wrap_reducer(fn): collects `update(value)` calls; the metric is fn(all values of all ranks)."""

    def __init__(self, reducer_fn: Callable[[list[Any]], Any]) -> None:
        self.reducer_fn = reducer_fn
        self.updates: list[Any] = []

    def update(self, value: Any) -> None:
        self.updates.append(value)

    def reset(self) -> None:
        self.updates = []

    def per_slot_reduce(self) -> list[Any]:
        return self.updates

    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
        return self.reducer_fn([v for values in per_slot_metrics for v in values])


@dataclass
class _Wrapped:
    reducer: MetricReducer
    name: str | None
    for_training: bool
    for_validation: bool


def _gather(value: Any) -> list[Any]:
    """Every rank's value, in rank order (one process: [value])."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        gathered: list[Any] = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(gathered, value)
        return gathered
    return [value]


class Reducers:
    """The reducers a context wrapped."""

    def __init__(self) -> None:
        self._wrapped: list[_Wrapped] = []

    def wrap(
        self, reducer: MetricReducer | Callable[[list[Any]], Any], name: str | None, for_training: bool,
        for_validation: bool,
    ) -> MetricReducer:  # fmt: skip
        if not isinstance(reducer, MetricReducer):
            if not callable(reducer):
                raise TypeError(
                    "context.wrap_reducer() takes a det.pytorch.MetricReducer or a function of a list "
                    f"of values, got {type(reducer).__name__}"
                )
            reducer = _SimpleReducer(reducer)
        if name is None and isinstance(reducer, _SimpleReducer):
            raise ValueError("context.wrap_reducer(fn) needs a name= for the metric fn computes")
        taken = {w.name for w in self._wrapped}
        if name is not None and name in taken:
            raise ValueError(f"context.wrap_reducer(): a reducer named {name!r} is wrapped already")
        self._wrapped.append(_Wrapped(reducer, name, for_training, for_validation))
        return reducer

    def reset(self, training: bool) -> None:
        for w in self._of(training):
            w.reducer.reset()

    def metrics(self, training: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for w in self._of(training):
            value = w.reducer.cross_slot_reduce(_gather(w.reducer.per_slot_reduce()))
            if w.name is not None:
                out[w.name] = value
            elif isinstance(value, dict):
                out.update(value)
            else:
                raise TypeError(
                    f"{type(w.reducer).__qualname__}.cross_slot_reduce returned a "
                    f"{type(value).__name__}; an unnamed reducer must return a dict of metrics "
                    "(or wrap it with name=...)"
                )
        return out

    def _of(self, training: bool) -> list[_Wrapped]:
        return [w for w in self._wrapped if (w.for_training if training else w.for_validation)]
