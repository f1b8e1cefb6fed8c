"""`pbt`: each round the bottom fraction is replaced by explored copies of the top, from their checkpoints."""

from __future__ import annotations

from typing import Any

import pytest
from searcher_sim import SimTrial, Simulator

from pedl.config import parse_experiment_config
from pedl.searcher import Close, Create, Shutdown, ValidateAfter, make_search_method


def config(resample: float = 0.0, perturb: float = 0.2, population: int = 8, rounds: int = 4) -> Any:
    return parse_experiment_config(
        f"""
hyperparameters:
  x: {{type: double, minval: 0.1, maxval: 0.9}}
  lr: {{type: log, minval: -4, maxval: -1}}
  units: {{type: int, minval: 4, maxval: 64}}
  act: {{type: categorical, vals: [relu, tanh, gelu]}}
  nested: {{depth: 2}}
searcher:
  name: pbt
  metric: loss
  population_size: {population}
  num_rounds: {rounds}
  length_per_round: {{batches: 20}}
  replace_function: {{truncate_fraction: 0.25}}
  explore_function: {{resample_probability: {resample}, perturb_factor: {perturb}}}
batches_per_step: 10
"""
    )


def by_x(trial: SimTrial) -> float:
    return trial.hparams["x"]


def test_each_round_replaces_the_bottom_quarter_with_copies_of_the_top_quarter() -> None:
    sim = Simulator(make_search_method(config(), seed=0), by_x, seed=0).run()
    creates = sim.created()
    assert len(creates) == 8 + 3 * 2
    assert sim.shutdown == Shutdown()
    # Replay round by round: the members, their ranking, who was closed and who was copied.
    members = [c.request_id for c in creates[:8]]
    for round_end in (20, 40, 60):
        ranked = sorted(members, key=lambda r: sim.trials[r].hparams["x"])
        children = [c for c in creates if c.checkpoint_from and sim.trials[c.request_id].start == round_end]
        assert [c.checkpoint_from for c in children] == ranked[:2]
        assert all(sim.trials[r].trained == round_end for r in ranked[-2:])
        assert all(Close(r) in sim.log for r in ranked[-2:])
        for child in children:
            assert ValidateAfter(child.request_id, round_end + 20) in sim.log
        members = ranked[:-2] + [c.request_id for c in children]
    assert all(sim.trials[r].trained == 80 and sim.trials[r].state == "COMPLETED" for r in members)
    assert {op.length for op in sim.log if isinstance(op, ValidateAfter)} == {20, 40, 60, 80}
    assert sim.searcher.progress() == 1.0


def test_explore_perturbs_numbers_within_bounds_and_keeps_categoricals_and_consts() -> None:
    sim = Simulator(make_search_method(config(perturb=0.5), seed=3), by_x, seed=3).run()
    for child in (c for c in sim.created() if c.checkpoint_from):
        parent = sim.trials[child.checkpoint_from].hparams
        hp = child.hparams
        assert hp["x"] == pytest.approx(min(max(parent["x"] * 0.5, 0.1), 0.9)) or hp["x"] == pytest.approx(
            min(max(parent["x"] * 1.5, 0.1), 0.9)
        )
        assert hp["lr"] in (
            pytest.approx(max(parent["lr"] * 0.5, 1e-4)),
            pytest.approx(min(parent["lr"] * 1.5, 1e-1)),
        )
        assert hp["units"] in (max(parent["units"] // 2, 4), min(-(-parent["units"] * 3 // 2), 64))
        assert hp["act"] == parent["act"] and hp["nested"] == {"depth": 2}


def test_resample_probability_one_draws_fresh_values() -> None:
    sim = Simulator(make_search_method(config(resample=1.0), seed=4), by_x, seed=4).run()
    children = [c for c in sim.created() if c.checkpoint_from]
    assert all(c.hparams["x"] != sim.trials[c.checkpoint_from].hparams["x"] for c in children)
    assert all(0.1 <= c.hparams["x"] <= 0.9 and 4 <= c.hparams["units"] <= 64 for c in children)


def test_members_that_exit_early_are_replaced_and_the_search_ends() -> None:
    sim = Simulator(
        make_search_method(config(), seed=5),
        by_x,
        seed=5,
        fails=lambda t: t.request_id in ("r2", "r3", "r4") and t.trained == 0,
    ).run()
    errors = [r for r, t in sim.trials.items() if t.state == "ERROR"]
    assert sorted(errors) == ["r2", "r3", "r4"]
    # Three exits exceed the quarter (2): all three slots get copies at the end of round one.
    assert len([c for c in sim.created() if sim.trials[c.request_id].start == 20]) == 3
    assert sim.shutdown == Shutdown()


def test_a_population_that_all_exits_fails_the_search() -> None:
    sim = Simulator(make_search_method(config(population=3), seed=1), by_x, fails=lambda t: True).run()
    assert sim.shutdown == Shutdown(failure=True)


@pytest.mark.parametrize("cut", [3, 17, 40])
def test_a_restored_searcher_continues_exactly_as_an_uninterrupted_one(cut: int) -> None:
    cfg = config(resample=0.3)
    whole = Simulator(make_search_method(cfg, seed=9), by_x, seed=1).run()
    halves = Simulator(make_search_method(cfg, seed=9), by_x, seed=1)
    halves.run_events(cut)
    halves.swap_in_restored(lambda: make_search_method(cfg, seed=9))
    assert halves.run().log == whole.log
    assert isinstance(whole.log[0], Create)
