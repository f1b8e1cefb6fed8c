"""`max_concurrent_trials` as one wrapper around any search method, its held trials surviving restarts."""

from __future__ import annotations

from typing import Any

import pytest
from searcher_sim import SimTrial, Simulator

from pedl.config import parse_experiment_config
from pedl.searcher import Close, Create, Operation, SearchMethod, Shutdown, ValidateAfter, make_search_method
from pedl.searcher.concurrency import ConcurrencyLimiter, limit_concurrency


class AllAtOnce(SearchMethod):
    """A custom method that never asks `has_room`: it creates every trial up front."""

    def __init__(self, config: Any, seed: int, trials: int = 7) -> None:
        super().__init__(config, seed)
        self.trials = trials
        self.done = 0

    def initial_operations(self) -> list[Operation]:
        ops: list[Operation] = []
        for _ in range(self.trials):
            rid = self.new_request_id()
            ops += [
                Create(rid, self.sample_hparams(), self.new_trial_seed()),
                ValidateAfter(rid, 20),
                Close(rid),
            ]
        return ops

    def on_validation_completed(self, request_id: str, metric: float, length: int) -> list[Operation]:
        return []

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        self.done += 1
        return [Shutdown()] if self.done == self.trials else []

    on_trial_exited_early = on_trial_closed

    def progress(self) -> float:
        return self.done / self.trials

    def method_state(self) -> dict[str, Any]:
        return {"done": self.done}

    def load_method_state(self, state: dict[str, Any]) -> None:
        self.done = state["done"]


def config(searcher: str) -> Any:
    return parse_experiment_config(
        f"hyperparameters:\n  x: {{type: double, minval: 0, maxval: 1}}\nsearcher: {searcher}\n"
        "batches_per_step: 10\n"
    )


RANDOM = "{name: random, metric: loss, max_trials: 7, max_length: 20, max_concurrent_trials: %d}"


def objective(trial: SimTrial) -> float:
    return trial.hparams["x"]


def test_a_method_that_never_asks_is_held_to_the_limit_and_finishes() -> None:
    cfg = config(RANDOM % 2)
    sim = Simulator(ConcurrencyLimiter(AllAtOnce(cfg, 1), 2), objective, seed=3).run()
    assert sim.max_open == 2
    assert len(sim.created()) == 7 and all(t.trained == 20 for t in sim.trials.values())
    assert sim.shutdown == Shutdown()


def test_held_trials_survive_a_restart_mid_search() -> None:
    cfg = config(RANDOM % 3)
    whole = Simulator(ConcurrencyLimiter(AllAtOnce(cfg, 1), 3), objective, seed=5).run()
    halves = Simulator(ConcurrencyLimiter(AllAtOnce(cfg, 1), 3), objective, seed=5)
    halves.run_events(4)
    assert halves.searcher.snapshot()["limiter"]["held"]  # trials are waiting at the snapshot
    halves.swap_in_restored(lambda: ConcurrencyLimiter(AllAtOnce(cfg, 1), 3))
    halves.run()
    assert halves.log == whole.log and halves.max_open == 3


@pytest.mark.parametrize("limit", [1, 4])
def test_methods_that_choose_what_to_start_are_bounded_without_holding(limit: int) -> None:
    asha = (
        "{name: adaptive_asha, metric: loss, max_trials: 16, max_length: 160, "
        f"max_concurrent_trials: {limit}}}"
    )
    for searcher in (RANDOM % limit, asha):
        method = make_search_method(config(searcher), seed=2)
        assert isinstance(method, ConcurrencyLimiter)
        sim = Simulator(method, objective, seed=1)
        sim.start()
        while sim.step():
            assert not method.held  # the method asked has_room, so nothing waits here
        assert sim.shutdown == Shutdown() and not sim.open_trials
        assert sim.max_open == limit


def test_no_limit_means_no_wrapper() -> None:
    cfg = config(RANDOM % 0)
    method = make_search_method(cfg, seed=1)
    assert not isinstance(method, ConcurrencyLimiter)
    assert limit_concurrency(method, cfg) is method
    with pytest.raises(ValueError, match="at least 1"):
        ConcurrencyLimiter(method, 0)
