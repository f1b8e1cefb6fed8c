"""The live table of a followed search and its closing best-trial line, from snapshots alone."""

from __future__ import annotations

import io

from rich.console import Console

from pedl._metrics import to_struct
from pedl.cli.search_view import MAX_ROWS, LiveOutput, SearchView, live_wanted
from pedl.v1 import common_pb2, scheduler_pb2

DONE, RUNNING = common_pb2.TRIAL_STATE_COMPLETED, common_pb2.TRIAL_STATE_ACTIVE


def _trial(trial_id: int, state: int, best: float | None, lr: float) -> scheduler_pb2.Trial:
    t = scheduler_pb2.Trial(
        id=trial_id, state=state, total_batches=100 * trial_id, hparams=to_struct({"lr": lr})
    )
    if best is not None:
        t.best_validation_metric = best
    return t


def _snapshot(*trials: scheduler_pb2.Trial, smaller: bool = True) -> scheduler_pb2.GetExperimentResponse:
    experiment = scheduler_pb2.Experiment(
        id=3, state=common_pb2.EXPERIMENT_STATE_ACTIVE, searcher_metric="val_loss", smaller_is_better=smaller
    )
    return scheduler_pb2.GetExperimentResponse(experiment=experiment, trials=list(trials))


SNAPSHOT = _snapshot(_trial(1, DONE, 0.4, 0.1), _trial(2, DONE, 0.2, 0.01), _trial(3, RUNNING, None, 0.5))


def test_running_trials_come_first_then_the_newest_ended() -> None:
    assert [row[0] for row in SearchView(SNAPSHOT).rows()] == ["3", "2", "1"]
    assert SearchView(SNAPSHOT).rows()[1] == ["2", "COMPLETED", "200", "0.2", "lr=0.01"]


def test_the_best_trial_follows_the_metric_direction() -> None:
    assert SearchView(SNAPSHOT).best_line() == "Best trial 2: val_loss=0.2 after 200 batches (lr=0.01)"
    larger = _snapshot(*SNAPSHOT.trials, smaller=False)
    assert SearchView(larger).best_line().startswith("Best trial 1: val_loss=0.4")
    assert "has reported val_loss" in SearchView(_snapshot(_trial(1, RUNNING, None, 0.1))).best_line()


def test_the_table_shows_counts_metric_and_values_and_stays_bounded() -> None:
    console = Console(file=io.StringIO(), width=120, record=True)
    console.print(SearchView(SNAPSHOT).table())
    text = console.export_text()
    assert "Experiment 3 ACTIVE: 1 ACTIVE, 2 COMPLETED" in text and "Best val_loss" in text
    assert "lr=0.5" in text and "Best trial 2" in text
    many = _snapshot(*(_trial(i, DONE, 1.0 / i, 0.1) for i in range(1, 60)))
    assert len(SearchView(many).rows()) == MAX_ROWS


def test_without_a_terminal_lines_are_plain_and_the_best_line_closes(capsys, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert not live_wanted()
    with LiveOutput(live_wanted()) as out:
        out.line("Trial 1 step 1")
        out.show(SearchView(SNAPSHOT))
        out.finish(SearchView(SNAPSHOT))
    assert (
        capsys.readouterr().out == "Trial 1 step 1\nBest trial 2: val_loss=0.2 after 200 batches (lr=0.01)\n"
    )
