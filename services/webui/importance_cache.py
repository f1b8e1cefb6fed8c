"""Hyperparameter importance for the web UI without optuna's first-use delay.

Importing optuna (and the SciPy parts PED-ANOVA uses) takes seconds on a busy machine; done by the
first importance request, it made that page wait for it. `start_warm_up` does it in a daemon thread
as the web UI starts, and `ImportanceCache` keeps each experiment's last answer until its trials'
best metrics change, so the page's repeated asks (every 10 s while a search runs) cost a
GetExperiment, not a recomputation. Who may read an experiment is still the scheduler's answer to
that GetExperiment, made with the asking user's token every time.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict

import structlog

from pedl import importance
from pedl.v1 import scheduler_pb2
from pedl_webui import configs

log = structlog.get_logger("webui.importance")


def warm_up() -> float | None:
    """Imports and runs PED-ANOVA once on a small synthetic search; returns the seconds it took, or
    None where optuna is not installed (each importance request then says what to install)."""
    start = time.perf_counter()
    observations = [
        importance.Observation({"x": float(i), "c": "ab"[i % 2]}, float(i * i))
        for i in range(importance.MIN_TRIALS + 2)
    ]
    try:
        importance.importances(observations, smaller_is_better=True)
    except importance.ImportanceUnavailable:
        return None
    return time.perf_counter() - start


def start_warm_up() -> threading.Thread:
    """Runs `warm_up` in a daemon thread (the server starts serving meanwhile)."""

    def run() -> None:
        try:
            seconds = warm_up()
            if seconds is None:
                log.warning("importance unavailable: optuna is not installed")
            else:
                log.info("importance ready", seconds=round(seconds, 3))
        except Exception as e:  # a broken optuna install: the requests report it, the server keeps going
            log.warning("importance warm-up failed", error=str(e))

    thread = threading.Thread(target=run, name="importance-warm-up", daemon=True)
    thread.start()
    return thread


def _fingerprint(response: scheduler_pb2.GetExperimentResponse) -> str:
    """What the answer depends on: the config (space, log scales), the direction and each trial's
    best searcher metric (a trial's hyperparameters never change)."""
    digest = hashlib.sha256()
    experiment = response.experiment
    digest.update(experiment.config_yaml.encode())
    digest.update(b"<" if experiment.smaller_is_better else b">")
    for trial in sorted(response.trials, key=lambda t: t.id):
        best = trial.best_validation_metric if trial.HasField("best_validation_metric") else None
        digest.update(f"{trial.id}:{best!r};".encode())
    return digest.hexdigest()


class ImportanceCache:
    """The last importances of up to `size` experiments, each kept while its fingerprint holds."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._kept: OrderedDict[int, tuple[str, list[importance.Importance]]] = OrderedDict()

    def importances(self, response: scheduler_pb2.GetExperimentResponse) -> list[importance.Importance]:
        exp_id = response.experiment.id
        key = _fingerprint(response)
        with self._lock:
            kept = self._kept.get(exp_id)
            if kept is not None and kept[0] == key:
                self._kept.move_to_end(exp_id)
                return kept[1]
        space = configs.hparam_space(configs.experiment_config(response.experiment))
        ranked = importance.experiment_importance(response.experiment, response.trials, space or {})
        with self._lock:
            self._kept[exp_id] = (key, ranked)
            self._kept.move_to_end(exp_id)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return ranked


# The web UI process's one cache (pedl_webui.api.importance).
CACHE = ImportanceCache()
