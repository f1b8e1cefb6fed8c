"""A trial whose runs fail the same way before training is not restarted again: it ends ERROR after
the first repeat, with the error once, instead of after max_restarts identical tracebacks."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.experiments.failures import RunFailure, fails_deterministically, run_failure
from pedl_scheduler.experiments.restart_policy import RestartBackoff
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops

CONFIG = """
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: error, max_trials: 1, max_length: {batches: 20}}
batches_per_step: 10
max_restarts: 5
"""

BUILD = RunFailure("builtins.ValueError", "__init__.py:12", trained=False)


def test_the_same_error_at_the_same_place_before_training_is_deterministic() -> None:
    assert fails_deterministically(BUILD, RunFailure("builtins.ValueError", "__init__.py:12", False))


def test_a_different_type_place_or_a_run_that_trained_is_not() -> None:
    assert not fails_deterministically(BUILD, RunFailure("builtins.KeyError", "__init__.py:12", False))
    assert not fails_deterministically(BUILD, RunFailure("builtins.ValueError", "__init__.py:13", False))
    assert not fails_deterministically(BUILD, RunFailure("builtins.ValueError", "__init__.py:12", True))
    trained = RunFailure("builtins.ValueError", "__init__.py:12", True)
    assert not fails_deterministically(trained, trained)


def test_a_failure_without_signature_never_counts() -> None:
    """Infrastructure failures (agent lost, store out of reach) reach the scheduler without one."""
    assert not fails_deterministically(None, BUILD)
    assert not fails_deterministically(BUILD, None)
    assert run_failure(agent_pb2.TrialExited(exit_code=1, error="agent a0 was lost")) is None
    partial = agent_pb2.TrialExited(exit_code=1, failure=agent_pb2.FailureSignature(exception_type="x.Y"))
    assert run_failure(partial) is None


def exited(agent, trial_id: int, run_id: int, failure: agent_pb2.FailureSignature | None) -> list:
    message = agent_pb2.TrialExited(
        trial_id=trial_id, run_id=run_id, exit_code=1, error="Traceback ...\nValueError: bad layer size"
    )
    if failure is not None:
        message.failure.CopyFrom(failure)
    return [(agent, agent_pb2.ConnectRequest(trial_exited=message))]


def fail_runs(tmp_path: Path, failures: list[agent_pb2.FailureSignature | None]) -> tuple[dict, list[str]]:
    """Runs one trial (max_restarts 5) whose runs fail as `failures` say; its row and log lines."""
    result: dict = {}

    async def scenario() -> None:
        cluster = Cluster()
        agent = cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0")]))
        manager = ExperimentManager(
            open_storage(str(tmp_path / "pedl.db")), cluster, "127.0.0.1:1", restart_backoff=RestartBackoff(0)
        )
        manager.create_experiment(CONFIG, b"m", "m")
        for failure in failures:
            manager.tick(0)
            (trial,) = manager.trials.values()
            manager.on_agent_messages(exited(agent, trial.id, trial.run_id, failure))
            if not manager.trials:
                break
        (row,) = trial_ops.trials_of(manager.db, 1)
        result.update(row)
        result["logs"] = [r["message"] for r in result_ops.logs_after(manager.db, row["id"], 0)]
        manager.db.close()

    asyncio.run(scenario())
    return result, result.pop("logs")


SIGNATURE = agent_pb2.FailureSignature(exception_type="builtins.ValueError", location="__init__.py:12")


def test_a_build_error_repeated_ends_the_trial_after_the_first_repeat(tmp_path: Path) -> None:
    row, logs = fail_runs(tmp_path, [SIGNATURE] * 6)
    assert row["state"] == "ERROR" and row["restarts"] == 1
    assert "ValueError: bad layer size" in row["error"] and "not restarted" in row["error"]
    assert sum("failed: Traceback" in line for line in logs) == 1  # the error once, not per run
    assert any("failed again with the same error (ValueError at __init__.py:12)" in line for line in logs)


def test_errors_after_training_began_use_every_restart(tmp_path: Path) -> None:
    trained = agent_pb2.FailureSignature(
        exception_type="builtins.ValueError", location="__init__.py:12", trained=True
    )
    row, _ = fail_runs(tmp_path, [trained] * 6)
    assert row["state"] == "ERROR" and row["restarts"] == 5 and "max_restarts is 5" in row["error"]


def test_failures_without_signature_use_every_restart(tmp_path: Path) -> None:
    row, _ = fail_runs(tmp_path, [None] * 6)
    assert row["state"] == "ERROR" and row["restarts"] == 5


def test_an_infrastructure_failure_between_two_build_errors_does_not_make_them_a_repeat(
    tmp_path: Path,
) -> None:
    row, _ = fail_runs(tmp_path, [SIGNATURE, None, SIGNATURE, SIGNATURE])
    assert row["state"] == "ERROR" and row["restarts"] == 3


def test_ranks_that_cannot_reach_each_other_end_the_trial_at_the_first_failure(tmp_path: Path) -> None:
    """The harness marks it `permanent`: the network between the ranks' machines needs fixing."""
    unreachable = agent_pb2.FailureSignature(
        exception_type="pedl.harness.rank_network.RanksUnreachable", permanent=True
    )
    row, logs = fail_runs(tmp_path, [unreachable] * 6)
    assert row["state"] == "ERROR" and row["restarts"] == 0 and "not restarted" in row["error"]
    assert any("RanksUnreachable, which no restart can cure" in line for line in logs)
