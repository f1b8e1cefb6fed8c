"""The searcher journal: a snapshot now and then plus the events since restore exactly the state a
searcher had, whatever the search method, so a large search need not write its whole state per event."""

from __future__ import annotations

import json
from typing import Any

import pytest
from searcher_sim import Simulator

import pedl_scheduler.searcher_journal as journal_module
from pedl.config import parse_experiment_config
from pedl.searcher import make_search_method, restore_search_method
from pedl_scheduler.searcher_journal import Flush, SearcherJournal

SEARCHES = {
    "asha": "{name: adaptive_asha, metric: error, max_trials: 60, max_length: {batches: 160}, "
    "divisor: 2, max_concurrent_trials: 6}",
    "pbt": "{name: pbt, metric: error, population_size: 6, num_rounds: 4, length_per_round: {batches: 20}, "
    "replace_function: {truncate_fraction: 0.34}, explore_function: {resample_probability: 0.3, "
    "perturb_factor: 0.2}}",
    "random": "{name: random, metric: error, max_trials: 40, max_length: {batches: 20}, "
    "max_concurrent_trials: 5}",
}


class Stored:
    """What the database would hold: the last snapshot (and the events it covers) and later events."""

    def __init__(self) -> None:
        self.snapshot = ""
        self.seq = 0
        self.events: dict[int, str] = {}
        self.snapshots = 0

    def write(self, flush: Flush | None) -> None:
        if flush is None:
            return
        if flush.snapshot is not None:
            self.snapshot, self.seq = flush.snapshot, flush.seq
            self.snapshots += 1
            if flush.drop_events:
                self.events = {s: e for s, e in self.events.items() if s > flush.seq}
        self.events.update(flush.events)


class Journaled:
    """Stands in for the searcher in the simulator: every event goes through the journal, and each
    one's writes are stored, as the scheduler does at the end of the transaction acting on it."""

    def __init__(self, journal: SearcherJournal, stored: Stored) -> None:
        self.journal, self.stored = journal, stored

    def __getattr__(self, name: str) -> Any:
        if name not in journal_module.EVENTS:
            return getattr(self.journal.searcher, name)

        def event(*args: Any) -> Any:
            ops = self.journal.call(name, *args)
            self.stored.write(self.journal.flush())
            return ops

        return event


@pytest.mark.parametrize("method", sorted(SEARCHES))
def test_a_snapshot_and_the_events_after_it_restore_the_searcher_exactly(method, monkeypatch) -> None:
    monkeypatch.setattr(journal_module, "SMALL_SNAPSHOT_BYTES", 0)  # journal events from the start
    monkeypatch.setattr(journal_module, "EVENTS_PER_SNAPSHOT", 7)
    config = parse_experiment_config(
        f"hyperparameters: {{x: {{type: double, minval: 0, maxval: 1}}}}\nsearcher: {SEARCHES[method]}\n"
    )
    stored = Stored()
    journal = SearcherJournal(make_search_method(config, seed=5))
    sim = Simulator(Journaled(journal, stored), lambda t: t.hparams["x"], seed=2)  # type: ignore[arg-type]
    sim.start()
    restores = 0
    while sim.step():
        restored = SearcherJournal(restore_search_method(config, 5, json.loads(stored.snapshot)), stored.seq)
        restored.replay(sorted(stored.events.items()))
        assert restored.searcher.snapshot() == journal.searcher.snapshot()
        assert restored.seq == journal.seq
        restores += 1
    assert sim.shutdown is not None and restores > 20
    assert stored.snapshots < journal.seq / 5  # most events were journaled, not snapshotted


def test_small_snapshots_are_written_with_every_event() -> None:
    config = parse_experiment_config(
        f"hyperparameters: {{x: {{type: double, minval: 0, maxval: 1}}}}\nsearcher: {SEARCHES['random']}\n"
    )
    journal = SearcherJournal(make_search_method(config, seed=1))
    journal.call("initial_operations")
    first = journal.flush()
    assert first is not None and first.snapshot is not None and first.seq == 1 and not first.events
    assert journal.flush() is None  # nothing new
    journal.call("on_trial_closed", "r1")
    second = journal.flush()
    assert second is not None and second.snapshot is not None and second.seq == 2
    with pytest.raises(ValueError, match="not a searcher event"):
        journal.call("snapshot")
