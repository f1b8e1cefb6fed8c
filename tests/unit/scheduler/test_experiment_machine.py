"""The experiment's state machine alone: rows of (state, event) -> (state, effects), each a behaviour
users rely on, with no database, agent or clock."""

from __future__ import annotations

import dataclasses

import pytest

from pedl_scheduler.experiments import machine as m
from pedl_scheduler.experiments.failures import RunFailure
from pedl_scheduler.experiments.restart_policy import INFRASTRUCTURE_EXITS

STORE_DOWN = next(iter(INFRASTRUCTURE_EXITS))
IMPORT = RunFailure("builtins.ModuleNotFoundError", "__init__.py:1", trained=False)
TRAINED = RunFailure("builtins.ValueError", "model.py:40", trained=True)
ENTRYPOINT = RunFailure("pedl.model_def.errors.ModelDefinitionError", "", trained=False, permanent=True)
INVALID_HP = RunFailure("determined.InvalidHP", "model.py:3", trained=False, permanent=True)


def trial(**fields: object) -> m.Trial:
    return dataclasses.replace(m.Trial(id=1, request_id="r1", running=True), **fields)  # type: ignore[arg-type]


def experiment(*trials: m.Trial, **fields: object) -> m.Experiment:
    base = m.Experiment(id=7, max_restarts=5, trials={t.id: t for t in trials or (trial(),)})
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def kinds(effects: list[m.Effect]) -> list[str]:
    return [type(e).__name__ for e in effects]


ENDS_ERROR = ["LogLine", "EndTrial", "TellSearcher", "Settle", "Wake"]

# (why, state, event, the trial's fields after, the effects' kinds)
RUN_EXITS = [
    (
        "a user error spends one of max_restarts and restarts after a backoff",
        experiment(trial(restarts=2)),
        m.RunExited(1, exit_code=1, error="Traceback\nValueError: x", failure=TRAINED),
        {"restarts": 3, "infrastructure_failures": 0},
        ["LogLine", "Restart", "Settle", "Wake"],
    ),
    (
        "an infrastructure fault (checkpoint store down) restarts without spending max_restarts",
        experiment(trial(restarts=2, infrastructure_failures=4)),
        m.RunExited(1, exit_code=STORE_DOWN, error="store unreachable"),
        {"restarts": 2, "infrastructure_failures": 5},
        ["Restart", "Settle", "Wake"],
    ),
    (
        "an agent lost never spends max_restarts, even with none left",
        experiment(trial(restarts=5)),
        m.RunExited(1, exit_code=-1, error="agent a0 was lost", infrastructure="agent a0 was lost"),
        {"restarts": 5, "infrastructure_failures": 1},
        ["Restart", "Settle", "Wake"],
    ),
    (
        "max_restarts spent by user errors ends the trial ERROR, and the searcher hears it exited early",
        experiment(trial(restarts=5)),
        m.RunExited(1, exit_code=1, error="boom", failure=TRAINED),
        {"restarts": 5},
        ["LogLine", *ENDS_ERROR[1:]],
    ),
    (
        "an ImportError before the first batch, the same as the run before, ends after one retry",
        experiment(trial(restarts=1, last_failure=IMPORT)),
        m.RunExited(1, exit_code=1, error="ModuleNotFoundError: No module named 'x'", failure=IMPORT),
        {"restarts": 1, "last_failure": IMPORT},
        ENDS_ERROR,
    ),
    (
        "the first ImportError is retried once (the file system may have been late)",
        experiment(trial()),
        m.RunExited(1, exit_code=1, error="ModuleNotFoundError", failure=IMPORT),
        {"restarts": 1, "last_failure": IMPORT},
        ["LogLine", "Restart", "Settle", "Wake"],
    ),
    (
        "an entrypoint naming no Trial class is permanent: no retry at all",
        experiment(trial()),
        m.RunExited(1, exit_code=1, error="entrypoint ':f' names f", failure=ENTRYPOINT),
        {"restarts": 0},
        ENDS_ERROR,
    ),
    (
        "det.InvalidHP ends the trial COMPLETED early, not as a failure",
        experiment(trial()),
        m.RunExited(1, exit_code=1, error="InvalidHP", failure=INVALID_HP),
        {"early_exit": "INVALID_HP", "restarts": 0, "last_failure": None},
        ["LogLine", "EndTrial", "TellSearcher", "Settle", "Wake"],
    ),
    (
        "a run that completed its work closes the trial with the searcher",
        experiment(trial(terminated=True, completed=True)),
        m.RunExited(1, exit_code=0),
        {"running": False},
        ["EndTrial", "TellSearcher", "Settle", "Wake"],
    ),
    (
        "a run paused during a checkpoint upload exits after it: stopped, to resume, not failed",
        experiment(trial(terminated=True, batches_trained=300, last_failure=TRAINED), state="PAUSED"),
        m.RunExited(1, exit_code=0),
        {"last_failure": None, "restarts": 0},
        ["LogLine", "SaveTrial", "Settle", "Wake"],
    ),
    (
        "a killed trial's exit ends it CANCELED; the search goes on without it",
        experiment(trial(killing=True)),
        m.RunExited(1, exit_code=137, killed=True),
        {"restarts": 0},
        ["EndTrial", "TellSearcher", "Settle", "Wake"],
    ),
    (
        "an agent lost mid-gang: the other members are killed, and it restarts unpaid",
        experiment(trial(gang=True, restarts=1)),
        m.RunExited(1, exit_code=-1, error="agent a1 was lost", infrastructure="agent a1 was lost"),
        {"restarts": 1, "infrastructure_failures": 1},
        ["KillRun", "Restart", "Settle", "Wake"],
    ),
    (
        "a gang that finished its work kills no one",
        experiment(trial(gang=True, terminated=True, completed=True)),
        m.RunExited(1, exit_code=0),
        {},
        ["EndTrial", "TellSearcher", "Settle", "Wake"],
    ),
    (
        "a process that exits 0 before it was told to stop failed",
        experiment(trial()),
        m.RunExited(1, exit_code=0),
        {"restarts": 1},
        ["LogLine", "Restart", "Settle", "Wake"],
    ),
]


@pytest.mark.parametrize(
    ("why", "state", "event", "after", "effects"), RUN_EXITS, ids=[r[0] for r in RUN_EXITS]
)
def test_run_exits(why: str, state: m.Experiment, event: m.Event, after: dict, effects: list[str]) -> None:
    new, done = m.handle(state, event)
    assert kinds(done) == effects, why
    for field, value in after.items():
        assert getattr(new.trial(1), field) == value, (why, field)


def test_errors_name_what_failed_and_why_no_restart_followed() -> None:
    _, effects = m.handle(
        experiment(trial(restarts=1, last_failure=IMPORT)),
        m.RunExited(1, exit_code=1, error="ModuleNotFoundError: No module named 'x'", failure=IMPORT),
    )
    (end,) = [e for e in effects if isinstance(e, m.EndTrial)]
    assert end.state == "ERROR" and "No module named 'x'" in end.error and "not restarted" in end.error
    _, effects = m.handle(experiment(trial(restarts=5)), m.RunExited(1, exit_code=1, error="boom"))
    (end,) = [e for e in effects if isinstance(e, m.EndTrial)]
    assert end.error == "boom (after 5 restarts, max_restarts is 5)"
    _, effects = m.handle(experiment(trial()), m.RunExited(1, exit_code=STORE_DOWN, error="x\nS3 timed out"))
    (restart,) = [e for e in effects if isinstance(e, m.Restart)]
    assert not restart.counted and "S3 timed out" in restart.why


def test_two_different_errors_before_training_are_both_retried() -> None:
    other = RunFailure("builtins.KeyError", "__init__.py:9", trained=False)
    new, effects = m.handle(
        experiment(trial(restarts=1, last_failure=IMPORT)), m.RunExited(1, 1, failure=other)
    )
    assert "Restart" in kinds(effects) and new.trial(1).restarts == 2


def test_pause_stops_running_trials_at_their_next_checkpoint_and_activate_resumes() -> None:
    running, queued = trial(), trial(id=2, request_id="r2", running=False)
    paused, effects = m.handle(experiment(running, queued), m.PauseRequested())
    assert paused.state == "PAUSED" and {t.state for t in paused.trials.values()} == {"PAUSED"}
    assert effects == [
        m.SetExperimentState("PAUSED"),
        m.RequestStop(1),
        m.SetTrialState(1, "PAUSED"),
        m.SetTrialState(2, "PAUSED"),
    ]
    assert m.handle(paused, m.PauseRequested()) == (paused, [])  # pausing twice changes nothing
    active, effects = m.handle(paused, m.ActivateRequested())
    assert active.state == "ACTIVE" and kinds(effects)[-1] == "Wake"
    assert m.handle(active, m.ActivateRequested()) == (active, [])


def test_kill_while_paused_cancels_every_trial_and_tells_no_searcher() -> None:
    stopping = trial(state="PAUSED", terminated=True)  # still uploading its checkpoint
    queued = trial(id=2, request_id="r2", running=False, state="PAUSED")
    killed, effects = m.handle(experiment(stopping, queued, state="PAUSED"), m.ExperimentKillRequested())
    assert killed.state == "CANCELED" and all(t.killing for t in killed.trials.values())
    assert effects == [m.SetExperimentState("CANCELED"), m.KillRun(1), m.EndTrial(2, "CANCELED"), m.Settle()]
    # The stopping run's exit then ends it CANCELED, with no searcher call: the experiment is over.
    _, effects = m.handle(killed, m.RunExited(1, exit_code=0))
    assert effects == [m.EndTrial(1, "CANCELED"), m.Settle(), m.Wake()]


def test_killing_one_trial_lets_the_search_go_on() -> None:
    state, effects = m.handle(experiment(trial(running=False)), m.TrialKillRequested(1))
    assert effects == [
        m.EndTrial(1, "CANCELED"),
        m.TellSearcher(1, "on_trial_exited_early"),
        m.Settle(),
        m.Wake(),
    ]
    state, effects = m.handle(experiment(trial()), m.TrialKillRequested(1))
    assert effects == [m.KillRun(1), m.Wake()] and state.trial(1).killing
    assert m.handle(state, m.TrialKillRequested(1)) == (state, [])  # its exit ends it, once


def test_results_the_scheduler_refuses_end_the_trial() -> None:
    _, effects = m.handle(experiment(trial()), m.ResultsRefused(1, "metric 'loss' is NaN"))
    assert effects[:3] == [
        m.KillRun(1),
        m.LogLine(1, "trial 1 failed: metric 'loss' is NaN"),
        m.EndTrial(1, "ERROR", "metric 'loss' is NaN"),
    ]


END = [
    ("a searcher that finished while runs still exit waits for them", ("ACTIVE", 2, True, False, []), None),
    ("the search goes on", ("ACTIVE", 0, False, False, ["COMPLETED"]), None),
    ("done, one trial completed", ("ACTIVE", 0, True, False, ["ERROR", "COMPLETED"]), ("COMPLETED", "")),
    (
        "done, every trial failed",
        ("ACTIVE", 0, True, False, ["ERROR", "ERROR"]),
        ("ERROR", "every trial failed"),
    ),
    ("the searcher failed", ("ACTIVE", 0, True, True, ["COMPLETED"]), ("ERROR", "the search failed")),
    ("killed, runs still exiting", ("CANCELED", 1, False, False, []), None),
    ("killed, all exited", ("CANCELED", 0, False, False, []), ("CANCELED", "")),
    # Determined's test_experiment_manipulation: the only trial killed, the search gave up.
    ("every trial killed", ("ACTIVE", 0, True, True, ["CANCELED"]), ("CANCELED", "")),
    ("some trials killed", ("ACTIVE", 0, True, False, ["CANCELED", "COMPLETED"]), ("COMPLETED", "")),
]


@pytest.mark.parametrize(("why", "args", "end"), END, ids=[r[0] for r in END])
def test_the_experiments_end(why: str, args: tuple, end: tuple[str, str] | None) -> None:
    assert m.experiment_end(*args) == end, why


def test_an_agent_lost_is_an_infrastructure_failure_named_in_the_wait() -> None:
    new, effects = m.handle(experiment(trial(restarts=5)), m.AgentLost(1, "a3"))
    (restart,) = [e for e in effects if isinstance(e, m.Restart)]
    assert not restart.counted and restart.why == "agent a3 was lost"
    assert new.trial(1).restarts == 5 and not new.trial(1).running


@pytest.mark.parametrize("exit_code", [0, -9, 1])
def test_a_cancel_after_the_last_work_but_before_the_exit_wins(exit_code: int) -> None:
    """Determined's cancel of a trial that did all its work (its last validation sent) but has not
    exited yet: the experiment ends CANCELED, whether the run then exits cleanly, is killed by the
    cancel, or fails on its way out."""
    done = trial(terminated=True, completed=True, batches_trained=20)
    killed, effects = m.handle(experiment(done), m.ExperimentKillRequested())
    assert effects == [m.SetExperimentState("CANCELED"), m.KillRun(1), m.Settle()]
    _, effects = m.handle(killed, m.RunExited(1, exit_code=exit_code, killed=exit_code == -9))
    assert effects == [m.EndTrial(1, "CANCELED"), m.Settle(), m.Wake()]
    assert m.experiment_end(
        "CANCELED", 0, searcher_done=False, searcher_failed=False, trial_states=["CANCELED"]
    ) == (
        "CANCELED",
        "",
    )
