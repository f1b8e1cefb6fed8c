"""The `random` searcher: max_trials samples, each to max length, never more open than allowed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from searcher_sim import SimTrial, Simulator

from pedl.config import parse_experiment_config
from pedl.config.searcher_settings import SearcherSettings
from pedl.searcher import Close, Create, Shutdown, ValidateAfter, make_search_method, restore_search_method


def config(searcher: str) -> Any:
    return parse_experiment_config(
        f"""
hyperparameters:
  lr: {{type: log, minval: -4, maxval: -1}}
  layers: {{type: int, minval: 1, maxval: 4}}
  act: {{type: categorical, vals: [relu, tanh]}}
  group: {{width: {{type: double, minval: 0.5, maxval: 2.0}}, depth: 3}}
searcher: {searcher}
batches_per_step: 10
"""
    )


def objective(trial: SimTrial) -> float:
    return trial.hparams["lr"] + 1.0 / trial.trained


def test_random_trains_max_trials_samples_to_max_length_within_the_concurrency_limit() -> None:
    cfg = config("{name: random, metric: loss, max_trials: 7, max_steps: 5, max_concurrent_trials: 2}")
    sim = Simulator(make_search_method(cfg, seed=3), objective, seed=1).run()
    creates = sim.created()
    assert len(creates) == 7
    assert all(t.trained == 50 and t.state == "COMPLETED" for t in sim.trials.values())
    assert sim.max_open == 2
    assert sim.shutdown == Shutdown()
    assert sim.searcher.progress() == 1.0
    for create in creates:
        hp = create.hparams
        assert 1e-4 <= hp["lr"] <= 1e-1 and hp["layers"] in range(1, 5) and hp["act"] in ("relu", "tanh")
        assert 0.5 <= hp["group"]["width"] <= 2.0 and hp["group"]["depth"] == 3
    assert len({c.seed for c in creates}) == 7
    assert len({c.hparams["lr"] for c in creates}) == 7


@pytest.mark.parametrize("limit", [0, None])
def test_zero_or_absent_concurrency_opens_every_trial_at_once(limit: int | None) -> None:
    field = "" if limit is None else f", max_concurrent_trials: {limit}"
    cfg = config(f"{{name: random, metric: loss, max_trials: 5, max_length: 40{field}}}")
    if limit is None:
        # the config layer defaults it to 16; a searcher built from a section without it has no limit
        section = {k: v for k, v in cfg.raw["searcher"].items() if k != "max_concurrent_trials"}
        cfg = dataclasses.replace(cfg, searcher=SearcherSettings.of(section))
    ops = make_search_method(cfg, seed=0).initial_operations()
    assert [type(op) for op in ops] == [Create, ValidateAfter, Close] * 5
    assert all(op.length == 40 for op in ops if isinstance(op, ValidateAfter))


def test_trials_that_exit_early_count_toward_max_trials_and_the_search_still_ends() -> None:
    cfg = config("{name: random, metric: loss, max_trials: 6, max_length: 30, max_concurrent_trials: 3}")
    failing = {"r2", "r5"}
    sim = Simulator(
        make_search_method(cfg, seed=5), objective, seed=2, fails=lambda t: t.request_id in failing
    ).run()
    assert len(sim.created()) == 6
    assert {r for r, t in sim.trials.items() if t.state == "ERROR"} == failing
    assert sim.max_open <= 3


def test_a_restored_searcher_continues_exactly_as_an_uninterrupted_one() -> None:
    cfg = config("{name: random, metric: loss, max_trials: 9, max_steps: 3, max_concurrent_trials: 4}")
    whole = Simulator(make_search_method(cfg, seed=8), objective, seed=4).run()
    halves = Simulator(make_search_method(cfg, seed=8), objective, seed=4)
    halves.run_events(7)
    halves.swap_in_restored(lambda: make_search_method(cfg, seed=8))
    halves.run()
    assert halves.log == whole.log


def test_the_same_seed_gives_the_same_search_and_another_seed_a_different_one() -> None:
    cfg = config("{name: random, metric: loss, max_trials: 4, max_steps: 3}")
    assert make_search_method(cfg, 1).initial_operations() == make_search_method(cfg, 1).initial_operations()
    assert make_search_method(cfg, 1).initial_operations() != make_search_method(cfg, 2).initial_operations()


def test_a_snapshot_of_thousands_of_open_trials_stays_small_and_restores_exactly() -> None:
    cfg = parse_experiment_config(
        "hyperparameters: {x: {type: double, minval: 0, maxval: 1}}\n"
        "searcher: {name: random, metric: error, max_trials: 5000, max_length: {batches: 1}, "
        "max_concurrent_trials: 0}\n"
    )
    searcher = make_search_method(cfg, seed=3)
    creates = [op for op in searcher.initial_operations() if isinstance(op, Create)]
    for op in creates[10:20] + creates[100:101]:
        searcher.on_trial_closed(op.request_id)
    snapshot = searcher.snapshot()
    assert snapshot["method"]["open_runs"] == [[1, 10], [21, 80], [102, 4899]]
    restored = restore_search_method(cfg, 3, snapshot)
    assert restored.open == searcher.open and restored.snapshot() == snapshot
    legacy = dict(snapshot, method={**snapshot["method"], "open": list(searcher.open)})
    del legacy["method"]["open_runs"]
    assert restore_search_method(cfg, 3, legacy).open == searcher.open


def test_a_trial_with_invalid_hyperparameters_is_replaced_by_a_new_sample() -> None:
    """Determined's random search: an INVALID_HP trial does not count toward max_trials; another sample
    takes its place. Other early exits (errors, kills, USER_REQUESTED_STOP) count, as before."""
    searcher = make_search_method(
        config("{name: random, metric: loss, max_trials: 2, max_length: 30}"), seed=3
    )
    first, second = [op for op in searcher.initial_operations() if isinstance(op, Create)]
    replaced = [
        op for op in searcher.on_trial_exited_early(first.request_id, "INVALID_HP") if isinstance(op, Create)
    ]
    assert len(replaced) == 1 and replaced[0].hparams != first.hparams
    assert searcher.progress() == 0.0
    assert searcher.on_trial_exited_early(second.request_id, "USER_REQUESTED_STOP") == []
    restored = restore_search_method(searcher.config, 3, searcher.snapshot())
    assert restored.on_trial_closed(replaced[0].request_id) == [Shutdown()]
    assert restored.progress() == 1.0


def test_grid_does_not_resample_a_point_with_invalid_hyperparameters() -> None:
    cfg = parse_experiment_config(
        "hyperparameters: {act: {type: categorical, vals: [relu, tanh]}}\n"
        "searcher: {name: grid, metric: loss, max_length: 30}\n"
    )
    searcher = make_search_method(cfg, seed=3)
    first, second = [op for op in searcher.initial_operations() if isinstance(op, Create)]
    assert searcher.on_trial_exited_early(first.request_id, "INVALID_HP") == []
    assert searcher.on_trial_closed(second.request_id) == [Shutdown()]
