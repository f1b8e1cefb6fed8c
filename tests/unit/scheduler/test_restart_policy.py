"""Only the trial's own failures spend `max_restarts`; every restart waits (backoff); a trial held up
by the infrastructure says so in describe."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pedl.harness.store_retry import STORE_UNAVAILABLE_EXIT_CODE
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.experiments.restart_policy import RestartBackoff
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import timelines as timeline_ops
from pedl_scheduler.storage.ops import trials as trial_ops

CONFIG = """
hyperparameters: {x: 1}
searcher: {name: single, metric: error, max_length: {batches: 20}}
batches_per_step: 10
max_restarts: 2
"""


@pytest.mark.parametrize("attempt", [1, 2, 3, 7, 40, 10_000])
def test_each_restart_waits_twice_as_long_with_jitter_up_to_the_cap(attempt: int) -> None:
    backoff = RestartBackoff(base_s=1.0, cap_s=60.0)
    full = min(60.0, 2.0 ** min(attempt - 1, 62))
    assert backoff.delay(attempt, rand=lambda: 0.0) == full / 2
    assert backoff.delay(attempt, rand=lambda: 1.0) == full


def test_a_zero_base_restarts_at_once_and_negative_values_are_refused() -> None:
    assert RestartBackoff(0, 0).delay(5) == 0
    with pytest.raises(ValueError, match="restart backoff must be >= 0"):
        RestartBackoff(-1, 5)


def run(tmp_path: Path, exits: list[int], lose_agent: bool = False, backoff: float = 0) -> dict:
    """One trial whose runs exit with `exits` (or whose agent is lost each time); its row, and more."""
    out: dict = {}

    async def scenario() -> None:
        cluster = Cluster()
        agent = cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0")]))
        manager = ExperimentManager(
            open_storage(str(tmp_path / "pedl.db")),
            cluster,
            "127.0.0.1:1",
            reconnect_grace=0,
            restart_backoff=RestartBackoff(backoff, backoff),
        )
        manager.create_experiment(CONFIG, b"m", "m")
        for code in exits:
            (trial,) = manager.trials.values()
            trial.not_before = None  # the test plays the backoff's time passing
            manager.tick(0)
            assert trial.running
            if lose_agent:
                manager.adoption.on_agent_disconnected("a0")
                manager.tick(0)
                manager.adoption.expire_unconfirmed(float("inf"))
            else:
                message = agent_pb2.TrialExited(
                    trial_id=trial.id, run_id=trial.run_id, exit_code=code, error="pedl.harness: store gone"
                )
                manager.on_agent_messages([(agent, agent_pb2.ConnectRequest(trial_exited=message))])
            if not manager.trials:
                break
        trial = next(iter(manager.trials.values()), None)
        if trial is not None:
            out["waiting"] = trial.waiting_reason
            out["not_before"] = trial.not_before
            out["running_after_tick"] = (manager.tick(0), trial.running)[1]
            out["reason_in_api"] = manager.trial_waiting_reason(trial.id)
        (row,) = trial_ops.trials_of(manager.db, 1)
        out.update(row)
        out["timeline"] = timeline_ops.of_trial(manager.db, row["id"])
        manager.db.close()

    asyncio.run(scenario())
    return out


def test_store_unreachable_exits_do_not_spend_max_restarts(tmp_path: Path) -> None:
    out = run(tmp_path, [STORE_UNAVAILABLE_EXIT_CODE] * 8)
    assert out["state"] == "ACTIVE" and out["restarts"] == 0
    assert "waiting for the infrastructure: the checkpoint store is unreachable" in out["waiting"]
    assert "failure 8 in a row, not counted against max_restarts" in out["waiting"]
    assert out["reason_in_api"] == out["waiting"]


def test_a_lost_agent_does_not_spend_max_restarts(tmp_path: Path) -> None:
    out = run(tmp_path, [0] * 5, lose_agent=True)
    assert out["state"] == "ACTIVE" and out["restarts"] == 0
    assert "agent a0 was lost" in out["waiting"]
    # Each lost run still has a timeline: its slots assigned, the loss, its slots free.
    runs = sorted({p["run_id"] for p in out["timeline"]})
    assert runs == [1, 2, 3, 4, 5]
    for run_id in runs:
        names = [p["name"] for p in out["timeline"] if p["run_id"] == run_id]
        assert names == ["slot assigned", "agent a0 lost", "slot free"]


def test_the_trials_own_failures_still_end_it_after_max_restarts(tmp_path: Path) -> None:
    out = run(tmp_path, [1, STORE_UNAVAILABLE_EXIT_CODE, 1, STORE_UNAVAILABLE_EXIT_CODE, 1])
    assert out["state"] == "ERROR" and out["restarts"] == 2 and "max_restarts is 2" in out["error"]


def test_a_restarted_trial_waits_out_its_backoff_before_it_is_placed(tmp_path: Path) -> None:
    out = run(tmp_path, [1], backoff=30)
    assert out["restarts"] == 1 and out["not_before"] is not None
    assert out["running_after_tick"] is False  # queued, but not placed before its backoff ends
