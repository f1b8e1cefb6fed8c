"""Keras validation metrics under Keras's names: `val_loss`, `val_accuracy` (what `model.fit`'s
history and Determined's TFKerasTrial report), for KerasTrial, TFKerasTrial and the Simple Model
Definition alike.

A config written for pedl's earlier names (`searcher.metric: accuracy`) still runs: when the
searcher metric is not reported but `val_<metric>` is, that value is also reported under the old
name, and the trial's log says so once, naming the field to change. So does one written for Keras
before 2.3, which named `metrics=["accuracy"]` `acc` (`val_acc`), as PEDL 0.11's configs do."""

from __future__ import annotations

import sys
from typing import Any

from pedl import _trial_context

PREFIX = "val_"
_warned: set[str] = set()


def keras_validation_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """`metrics` of a validation pass, each name with Keras's `val_` prefix, plus the searcher
    metric under its old unprefixed name when the config still uses it."""
    named = {name if name.startswith(PREFIX) else PREFIX + name: value for name, value in metrics.items()}
    old = _searcher_metric()
    current = _keras_name(old) if old is not None else ""
    if old is not None and old not in named and current in named:
        named[old] = named[current]
        if old not in _warned:
            _warned.add(old)
            print(
                f"pedl: searcher.metric {old!r} is the Keras validation metric {current!r}; "
                f"reporting it under both names (write `metric: {current}`, as Keras and "
                "Determined name it)",
                file=sys.stderr,
                flush=True,
            )
    return named


def _keras_name(old: str) -> str:
    """The validation metric a config's old searcher metric means: `val_<name>`, with Keras
    before 2.3's `acc` for `accuracy`."""
    bare = old.removeprefix(PREFIX)
    return PREFIX + ("accuracy" if bare == "acc" else bare)


def _searcher_metric() -> str | None:
    try:
        config = _trial_context.get_experiment_config()
    except RuntimeError:  # a controller driven outside a trial (tests, det.keras's load)
        return None
    metric = (config.get("searcher") or {}).get("metric")
    return metric if isinstance(metric, str) else None
