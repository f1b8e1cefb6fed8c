"""The training and validation data of a captured `model.fit(...)` call, as KerasTrial data sources.

Accepted as Keras accepts them: NumPy-like arrays `x`, `y`, `sample_weight` (batched by
`batch_size`, default 32; reshuffled every epoch when `shuffle`), a batched `tf.data.Dataset`,
a `keras.utils.PyDataset`, or a started Python generator / iterator (endless, with
`steps_per_epoch`). Validation comes from `validation_data` (arrays tuple, dataset, PyDataset;
`validation_steps` limits a dataset; a generator with `validation_steps` gives that many batches
per validation, drawn on from where the last one stopped) or `validation_split` of arrays (the
last fraction, as Keras takes it). Generators are resumed by replay (`pedl.keras._replay`).
"""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from pedl.keras._data import Arrays
from pedl.keras._replay import Replayed, ReplayLog, is_started_generator
from pedl.simple._capture import FitCall

DEFAULT_BATCH_SIZE = 32  # Keras's own default for arrays
REPLAYABLE = "a tf.data.Dataset or a keras.utils.PyDataset"


def _arrays(value: Any) -> Any:
    """NumPy arrays in the nesting Keras accepts (array, list of arrays, dict of arrays)."""
    if value is None or isinstance(value, np.ndarray):
        return value
    if isinstance(value, dict):
        return {k: _arrays(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and value and all(hasattr(v, "shape") for v in value):
        return [_arrays(v) for v in value]
    return np.asarray(value)


def _is_arrays(value: Any) -> bool:
    return isinstance(value, (np.ndarray, dict, list, tuple)) or hasattr(value, "__array__")


def _length(arrays: Any) -> int:
    return len(tf.nest.flatten(arrays)[0])


def _steps(call: FitCall, name: str, what: str) -> int:
    """steps_per_epoch / validation_steps, required with a generator (it may never end)."""
    value = call.arguments.get(name)
    if value is None:
        raise ValueError(
            f"{call.where}: model.fit() got a Python generator as {what} but no {name}; a generator "
            f"may never end, so pass {name}= (the number of its batches in one "
            f"{'epoch' if name == 'steps_per_epoch' else 'validation'})"
        )
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise TypeError(f"{call.where}: model.fit() {name} must be a positive int, got {value!r}")
    return int(value)


def _check_replayable(value: Any, what: str, call: FitCall, log: ReplayLog) -> Any:
    if isinstance(value, (tf.data.Dataset, keras.utils.PyDataset)):
        return value
    where = call.where
    if is_started_generator(value):
        steps = _steps(call, "steps_per_epoch" if what == "x" else "validation_steps", what)
        role = "training" if what == "x" else "validation"
        return Replayed(value, role, f"{where} (model.fit)", log, steps)
    raise TypeError(
        f"{where}: model.fit() got a {type(value).__module__}.{type(value).__qualname__} as {what}; "
        f"expected NumPy arrays, {REPLAYABLE}, or a Python generator"
    )


def _split(arrays: tuple[Any, ...], fraction: float, where: str) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    if not 0 < fraction < 1:
        raise ValueError(f"{where}: model.fit() validation_split must be between 0 and 1, got {fraction}")
    n = _length(arrays[0])
    at = int(math.floor(n * (1.0 - fraction)))
    if at == 0 or at == n:
        raise ValueError(f"{where}: validation_split={fraction} of {n} samples leaves one side empty")

    def part(rows: slice) -> tuple[Any, ...]:
        return tuple(None if a is None else tf.nest.map_structure(lambda v: v[rows], a) for a in arrays)

    return part(slice(0, at)), part(slice(at, n))


def _training(call: FitCall, log: ReplayLog) -> tuple[Any, tuple[Any, ...] | None]:
    """The training source, and the validation arrays split off it (validation_split) if any."""
    a, where = call.arguments, call.where
    x = a.get("x")
    if x is None:
        raise TypeError(f"{where}: model.fit() got no training data (x)")
    if not _is_arrays(x):
        for name in ("y", "sample_weight"):
            if a.get(name) is not None:
                raise TypeError(
                    f"{where}: model.fit() got {name} with x a {type(x).__name__}; {name} "
                    "goes with array inputs only (a dataset yields its own targets)"
                )
        if a.get("validation_split"):
            raise ValueError(f"{where}: model.fit() validation_split works with array inputs only")
        return _check_replayable(x, "x", call, log), None
    arrays = tuple(_arrays(v) for v in (x, a.get("y"), a.get("sample_weight")))
    if arrays[2] is None:
        arrays = arrays[:2]
    split = None
    if a.get("validation_split") and a.get("validation_data") is None:
        arrays, split = _split(arrays, float(a["validation_split"]), where)
    size = _batch_size(a.get("batch_size"), "batch_size", where)
    shuffle = a.get("shuffle", True)
    return Arrays(arrays, size, shuffle=bool(shuffle)), split


def _batch_size(value: Any, name: str, where: str) -> int:
    if value is None:
        return DEFAULT_BATCH_SIZE
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise TypeError(f"{where}: model.fit() {name} must be a positive int, got {value!r}")
    return int(value)


def _validation(call: FitCall, split: tuple[Any, ...] | None, log: ReplayLog) -> Any:
    a, where = call.arguments, call.where
    size = _batch_size(a.get("validation_batch_size") or a.get("batch_size"), "validation_batch_size", where)
    data = a.get("validation_data")
    if split is not None:
        return Arrays(split, size, shuffle=False)
    if data is None:
        raise ValueError(
            f"{where}: model.fit() got no validation data; PEDL validates the model for the searcher, so "
            "pass validation_data=(x_val, y_val) (or a dataset) or validation_split="
        )
    if isinstance(data, (tuple, list)) and len(data) in (2, 3) and all(_is_arrays(v) for v in data):
        arrays = tuple(_arrays(v) for v in data)
        if len(arrays) == 3 and arrays[2] is None:
            arrays = arrays[:2]
        return Arrays(arrays, size, shuffle=False)
    data = _check_replayable(data, "validation_data", call, log)
    steps = a.get("validation_steps")
    if steps is not None and isinstance(data, tf.data.Dataset):
        data = data.take(int(steps))
    return data


def fit_data(call: FitCall) -> tuple[Any, Any]:
    """(training source, validation source) for `KerasTrialController`."""
    if call.arguments.get("class_weight") is not None:
        raise ValueError(
            f"{call.where}: model.fit() class_weight is not supported by PEDL; weight the samples with "
            "sample_weight (or a dataset yielding (x, y, sample_weight)) instead"
        )
    log = ReplayLog()  # one for both: a replay redraws the two generators in their first order
    training, split = _training(call, log)
    return training, _validation(call, split, log)
