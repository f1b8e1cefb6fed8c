"""PEDL's `adaptive` (a budget) and `adaptive_simple` (max_trials) run as ASHA brackets."""

from __future__ import annotations

from typing import Any

from searcher_sim import SimTrial, Simulator

from pedl.config import parse_experiment_config
from pedl.searcher import ValidateAfter, make_search_method


def config(searcher: str) -> Any:
    return parse_experiment_config(
        f"""
hyperparameters:
  x: {{type: double, minval: 0, maxval: 1}}
searcher: {{metric: loss, {searcher}}}
batches_per_step: 10
"""
    )


def by_x(trial: SimTrial) -> float:
    return trial.hparams["x"]


def test_adaptive_spends_about_its_budget_on_as_many_trials_as_it_pays_for() -> None:
    # Rungs at 10, 40, 160 batches: a configuration costs 10 + 30/4 + 120/16 = 25 batches on average.
    cfg = config(
        "name: adaptive, target_trial_steps: 16, step_budget: 200, mode: aggressive, max_rungs: 3, "
        "max_concurrent_trials: 4"
    )
    sim = Simulator(make_search_method(cfg, seed=0), by_x, seed=0).run()
    assert len([c for c in sim.created() if c.checkpoint_from is None]) == 80
    assert {op.length for op in sim.log if isinstance(op, ValidateAfter)} == {10, 40, 160}
    # Early results get promoted before their rung fills up, so ASHA overspends SHA's budget a little.
    assert 0.8 * 2000 <= sim.batches() <= 1.5 * 2000
    assert sim.max_open == 4


def test_adaptive_simple_splits_max_trials_evenly_over_the_brackets() -> None:
    cfg = config("name: adaptive_simple, max_trials: 13, max_steps: 16, max_rungs: 3, mode: standard")
    sim = Simulator(make_search_method(cfg, seed=1), by_x, seed=1).run()
    first = [t.validations[0][0] for t in sim.trials.values() if t.checkpoint_from is None]
    assert sorted(first) == [10] * 7 + [40] * 6
    assert max(t.trained for t in sim.trials.values()) == 160


def test_adaptive_restores_mid_search() -> None:
    cfg = config("name: adaptive, max_length: 160, budget: 1000, max_concurrent_trials: 3")
    whole = Simulator(make_search_method(cfg, seed=2), by_x, seed=2).run()
    halves = Simulator(make_search_method(cfg, seed=2), by_x, seed=2)
    halves.run_events(30)
    halves.swap_in_restored(lambda: make_search_method(cfg, seed=2))
    assert halves.run().log == whole.log
