"""The `grid` searcher: exactly one trial per point of the product of the hyperparameter values."""

from __future__ import annotations

import itertools

from searcher_sim import SimTrial, Simulator

from pedl.config import parse_experiment_config
from pedl.searcher import make_search_method

CONFIG = """
hyperparameters:
  lr: {type: log, minval: -3, maxval: -1, count: 3}
  layers: {type: int, minval: 1, maxval: 4, count: 2}
  act: {type: categorical, vals: [relu, tanh]}
  width: 64
searcher: {name: grid, metric: loss, max_length: 25, max_concurrent_trials: 3}
batches_per_step: 10
"""


def objective(trial: SimTrial) -> float:
    return trial.hparams["lr"] * trial.hparams["layers"]


def test_grid_runs_every_point_of_the_product_once_to_max_length() -> None:
    cfg = parse_experiment_config(CONFIG)
    sim = Simulator(make_search_method(cfg, seed=0), objective, seed=3).run()
    points = [
        (round(c.hparams["lr"], 9), c.hparams["layers"], c.hparams["act"], c.hparams["width"])
        for c in sim.created()
    ]
    assert len(points) == 12
    assert sorted(points) == sorted(itertools.product([0.001, 0.01, 0.1], [1, 4], ["relu", "tanh"], [64]))
    assert all(t.trained == 25 for t in sim.trials.values())
    assert sim.max_open == 3
    assert sim.searcher.progress() == 1.0


def test_grid_snapshot_restores_mid_search() -> None:
    cfg = parse_experiment_config(CONFIG)
    whole = Simulator(make_search_method(cfg, seed=0), objective, seed=9).run()
    halves = Simulator(make_search_method(cfg, seed=0), objective, seed=9)
    halves.run_events(10)
    halves.swap_in_restored(lambda: make_search_method(cfg, seed=0))
    assert halves.run().log == whole.log
