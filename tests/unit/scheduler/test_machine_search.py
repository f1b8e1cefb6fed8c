"""The searcher's operations and checkpoint hand-offs as the state machine's events, alone: rows of
(state, event) -> (state, effects), with no database, agent or searcher."""

from __future__ import annotations

import pytest

from pedl.searcher import Close, Create, Operation, Resume, Shutdown, ValidateAfter
from pedl_scheduler.experiments import machine as m

A, B = Create("a", {"lr": 0.1}, 1), Create("b", {"lr": 0.2}, 2)
CHILD = Create("c", {"lr": 0.3}, 3, checkpoint_from="a")
END = [m.SaveSearcher(), m.Settle()]

# (why, the searcher's operations, the effects, searcher_done and searcher_failed after)
DECISIONS: list[tuple[str, list[Operation], list[m.Effect], tuple[bool, bool]]] = [
    (
        "new trials are created together, each with the targets and close decided with it",
        [A, ValidateAfter("a", 100), B, ValidateAfter("b", 100), Close("b")],
        [m.CreateTrials(((A, (ValidateAfter("a", 100),)), (B, (ValidateAfter("b", 100), Close("b"))))), *END],
        (False, False),
    ),
    (
        "another trial's operation between two creations keeps the searcher's order",
        [A, Close("q"), B],
        [m.CreateTrials(((A, ()),)), m.SetTarget(Close("q")), m.CreateTrials(((B, ()),)), *END],
        (False, False),
    ),
    (
        "a PBT child is created like any trial (its checkpoint hand-off follows when the parent saves)",
        [CHILD, ValidateAfter("c", 50)],
        [m.CreateTrials(((CHILD, (ValidateAfter("c", 50),)),)), *END],
        (False, False),
    ),
    (
        "a live trial gets a new target, another is closed",
        [ValidateAfter("x", 200), Close("y")],
        [m.SetTarget(ValidateAfter("x", 200)), m.SetTarget(Close("y")), *END],
        (False, False),
    ),
    (
        "an ASHA promotion reopens the trial, then trains it to its next rung",
        [Resume("x"), ValidateAfter("x", 400)],
        [m.ReopenTrial("x"), m.SetTarget(ValidateAfter("x", 400)), *END],
        (False, False),
    ),
    ("the search is over: the experiment may end", [Shutdown()], END, (True, False)),
    ("the search failed", [Shutdown(failure=True)], END, (True, True)),
    ("nothing decided: the journal is still written", [], END, (False, False)),
]


@pytest.mark.parametrize(("why", "ops", "effects", "after"), DECISIONS, ids=[r[0] for r in DECISIONS])
def test_the_searchers_decisions(
    why: str, ops: list[Operation], effects: list[m.Effect], after: tuple[bool, bool]
) -> None:
    state, done = m.handle(m.Experiment(id=7), m.SearcherDecided(ops))
    assert done == effects, why
    assert (state.searcher_done, state.searcher_failed) == after, why


def test_a_searcher_that_finishes_while_runs_still_exit_ends_the_experiment_after_them() -> None:
    exiting = m.Trial(id=1, request_id="a", running=True, terminated=True, completed=True)
    state, effects = m.handle(m.Experiment(id=7, trials={1: exiting}), m.SearcherDecided([Shutdown()]))
    assert state.searcher_done and effects == END
    assert m.experiment_end(state.state, 1, state.searcher_done, state.searcher_failed, []) is None
    state, effects = m.handle(state, m.RunExited(1, exit_code=0))
    assert [type(e).__name__ for e in effects] == ["EndTrial", "TellSearcher", "Settle", "Wake"]
    assert m.experiment_end(state.state, 0, state.searcher_done, False, ["COMPLETED"]) == ("COMPLETED", "")


def test_a_failed_search_stays_failed_whatever_the_searcher_says_next() -> None:
    state, _ = m.handle(m.Experiment(id=7), m.SearcherDecided([Shutdown(failure=True)]))
    state, _ = m.handle(state, m.SearcherDecided([Shutdown()]))
    assert (state.searcher_done, state.searcher_failed) == (True, True)


@pytest.mark.parametrize("experiment_state", ["ACTIVE", "PAUSED", "CANCELED"])
def test_a_stored_checkpoint_is_handed_to_the_waiting_children(experiment_state: str) -> None:
    """Also when the experiment was paused during the upload: the children copy what was stored."""
    uploading = m.Trial(id=1, request_id="a", running=True, terminated=True, state="PAUSED")
    before = m.Experiment(id=7, state=experiment_state, trials={1: uploading})
    stored = m.CheckpointStored(1, "uuid-1", 300, 3)
    after, effects = m.handle(before, stored)
    assert after == before
    assert effects == [m.HandOffCheckpoint(stored)]
