"""The web UI's importance cache and warm-up: an experiment's answer is reused while its trials' best
metrics hold and recomputed when they change; the warm-up leaves optuna imported for the first request."""

from __future__ import annotations

import subprocess
import sys

from pedl import importance
from pedl_webui.importance_cache import ImportanceCache
from tests.unit.insight.test_importance_commands import synthetic


def test_an_unchanged_search_reuses_the_answer_and_a_changed_one_is_recomputed() -> None:
    cache = ImportanceCache()
    response = synthetic()  # the metric is 10 x + 0.1 y: x matters
    first = cache.importances(response)
    assert [i.name for i in first] == ["x", "y"]
    assert first == importance.experiment_importance(response.experiment, response.trials)
    assert cache.importances(synthetic()) is first  # the same trials and metrics: kept
    for trial in response.trials:  # now only y matters
        trial.best_validation_metric = trial.hparams["y"] * 10
    changed = cache.importances(response)
    assert changed is not first and [i.name for i in changed] == ["y", "x"]


def test_a_new_trial_or_another_direction_is_a_new_answer() -> None:
    cache = ImportanceCache()
    response = synthetic()
    first = cache.importances(response)
    response.experiment.smaller_is_better = False
    assert cache.importances(response) is not first
    grown = synthetic()
    extra = grown.trials.add()
    extra.CopyFrom(grown.trials[0])
    extra.id = 99
    assert cache.importances(grown) is not cache.importances(synthetic())


def test_the_least_recently_asked_experiment_leaves_a_full_cache() -> None:
    cache = ImportanceCache(size=1)
    seven = synthetic()
    eight = synthetic()
    eight.experiment.id = 8
    kept = cache.importances(seven)
    cache.importances(eight)
    assert cache.importances(seven) is not kept


def test_the_warm_up_thread_leaves_optuna_imported() -> None:
    script = (
        "import sys\n"
        "from pedl_webui import importance_cache\n"
        "assert 'optuna' not in sys.modules\n"
        "importance_cache.start_warm_up().join()\n"
        "assert 'optuna.importance' in sys.modules, sorted(sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "importance ready" in done.stdout + done.stderr
