"""`on_trial_revived`: a trial the infrastructure ended (an older pedl's ERROR) comes back into its search
as if it had never exited, so `pedl experiment activate` can finish the experiment; each method in turn."""

from __future__ import annotations

from typing import Any

import pytest
from searcher_sim import SimTrial, Simulator

from pedl.config import parse_experiment_config
from pedl.searcher import SearcherError, Shutdown, make_search_method

SPACE = """
hyperparameters:
  x: {type: double, minval: 0, maxval: 1, count: 3}
  g: {type: categorical, vals: [a, b, c]}
batches_per_step: 10
"""

SEARCHERS = {
    "single": "{name: single, metric: loss, max_length: {batches: 40}}",
    "random": "{name: random, metric: loss, max_trials: 6, max_length: {batches: 40}}",
    "random_limited": "{name: random, metric: loss, max_trials: 6, max_concurrent_trials: 2, "
    "max_length: {batches: 40}}",
    "grid": "{name: grid, metric: loss, max_length: {batches: 40}}",
    "asha": "{name: adaptive_asha, metric: loss, max_trials: 16, max_length: {batches: 160}, divisor: 2}",
    "adaptive_simple": "{name: adaptive_simple, metric: loss, max_trials: 8, max_length: {batches: 160}}",
    "pbt": "{name: pbt, metric: loss, population_size: 4, num_rounds: 3, length_per_round: {batches: 20}, "
    "replace_function: {truncate_fraction: 0.25}, explore_function: {resample_probability: 0.2, "
    "perturb_factor: 0.2}}",
}


def config(name: str) -> Any:
    return parse_experiment_config(SPACE + f"searcher: {SEARCHERS[name]}\n")


def loss(trial: SimTrial) -> float:
    return trial.hparams["x"] + 10.0 / trial.trained


def end_with_outage(name: str, doomed: set[str] | None) -> tuple[Simulator, list[str]]:
    """Runs the search while the trials in `doomed` (None: every trial) fail at their next move, as
    an outage ended them under an older pedl; the search then ends. Returns the trials it ended."""
    outage = [True]

    def fails(trial: SimTrial) -> bool:
        return outage[0] and (doomed is None or trial.request_id in doomed)

    sim = Simulator(make_search_method(config(name), seed=3), loss, seed=5, fails=fails)
    sim.run()
    outage[0] = False
    return sim, [t.request_id for t in sim.trials.values() if t.state == "ERROR"]


def revive(sim: Simulator, name: str, request_ids: list[str]) -> None:
    """What activate does: the searcher restored from its stored snapshot hears each revival."""
    sim.swap_in_restored(lambda: make_search_method(config(name), seed=3))
    sim.shutdown = None
    for request_id in request_ids:
        sim.trials[request_id].state = "ACTIVE"
        sim.apply(sim.searcher.on_trial_revived(request_id))


@pytest.mark.parametrize("name", sorted(SEARCHERS))
def test_an_experiment_every_trial_of_which_the_infrastructure_ended_completes_once_revived(
    name: str,
) -> None:
    sim, ended = end_with_outage(name, None)
    assert ended and all(t.state == "ERROR" for t in sim.trials.values())
    created = len(sim.created())
    revivable = [r for r in ended if _takes_back(sim, r)]
    assert revivable
    revive(sim, name, revivable)
    sim.run()  # asserts: a Shutdown, and no trial left open
    assert isinstance(sim.shutdown, Shutdown) and not sim.shutdown.failure
    assert all(sim.trials[r].state == "COMPLETED" for r in revivable)
    assert sim.searcher.progress() == 1.0
    if name not in ("asha", "adaptive_simple", "pbt"):  # these create more trials as results come in
        assert len(sim.created()) == created  # revived trials are not replaced by new ones


@pytest.mark.parametrize("name", ["random", "random_limited", "grid", "asha", "adaptive_simple"])
def test_one_revived_trial_finishes_a_search_whose_others_completed(name: str) -> None:
    sim, ended = end_with_outage(name, {"r2"})
    assert ended == ["r2"]
    revive(sim, name, ended)
    sim.run()
    assert sim.trials["r2"].state == "COMPLETED" and not sim.shutdown.failure


def test_a_revived_asha_trial_ranks_with_its_real_result_not_last() -> None:
    sim, ended = end_with_outage("asha", {"r1"})
    revive(sim, "asha", ended)
    rung_results = [e for b in sim.searcher.brackets for rung in b.rungs for e in rung if e[1] is None]
    assert rung_results == []  # the placeholder ranking it last is gone
    sim.run()
    assert sim.trials["r1"].validations


def test_a_revived_single_trial_lets_the_search_succeed() -> None:
    sim, ended = end_with_outage("single", None)
    assert sim.shutdown.failure
    revive(sim, "single", ended)
    sim.run()
    assert sim.trials["r1"].validations[-1][0] == 40 and not sim.shutdown.failure


@pytest.mark.parametrize("name", sorted(SEARCHERS))
def test_a_trial_the_search_never_made_or_still_has_open_cannot_be_revived(name: str) -> None:
    sim = Simulator(make_search_method(config(name), seed=3), loss, seed=5)
    sim.start()
    with pytest.raises(SearcherError, match="r1"):
        sim.searcher.on_trial_revived("r1")  # still open
    sim.run()
    with pytest.raises(SearcherError, match="r999"):
        sim.searcher.on_trial_revived("r999")


@pytest.mark.parametrize("name", ["asha", "adaptive_simple", "pbt"])
def test_a_completed_trial_cannot_be_revived_where_the_search_remembers_how_it_ended(name: str) -> None:
    """random, grid and single keep no per-trial end (their snapshots stay small): the scheduler only
    revives trials it recorded as ended ERROR by the infrastructure."""
    sim = Simulator(make_search_method(config(name), seed=3), loss, seed=5)
    sim.run()
    with pytest.raises(SearcherError, match="r1"):
        sim.searcher.on_trial_revived("r1")


def test_pbt_refuses_a_member_a_later_round_replaced() -> None:
    sim, ended = end_with_outage("pbt", {"r1"})  # exits in round 0, ranks last, replaced
    assert ended == ["r1"] and "r1" not in sim.searcher.members
    with pytest.raises(SearcherError, match="not a member"):
        sim.searcher.on_trial_revived("r1")


def _takes_back(sim: Simulator, request_id: str) -> bool:
    """Whether the (restored) searcher would take this trial back, tried on a copy."""
    probe = make_search_method(sim.searcher.config, seed=3)
    probe.restore(sim.searcher.snapshot())
    try:
        probe.on_trial_revived(request_id)
    except SearcherError:
        return False
    return True
