"""The scheduler and the checkpoint store keep one truth while checkpoints are deleted: the store never
deletes bytes the scheduler has not recorded (a checkpoint listed COMPLETED always downloads), and a
deletion racing the reconciler ends DELETED, never "lost from the store".

The store here is an in-memory stand-in for the deleter's client (the checkpoint store service
itself is exercised in tests/integration/test_checkpoint_lifecycle.py): it records what it is asked.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from pedl._metrics import to_struct
from pedl._timeutil import utc_now
from pedl.checkpoints import CheckpointError, CheckpointNotFound
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.checkpoint_reconciler import CheckpointReconciler
from pedl_scheduler.experiments import KIND_NAMES
from support import stored
from tests.unit.scheduler.test_agent_messages import Scenario

# Keeps each trial's best checkpoint only: a checkpoint whose validation is worse than an earlier
# one is deleted as soon as its trial ends, in the batch that records it.
CONFIG = """
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: error, max_trials: 1, max_length: {batches: 20}}
batches_per_step: 10
min_checkpoint_period: {batches: 10}
min_validation_period: {batches: 10}
checkpoint_storage: {save_trial_best: 1, save_trial_latest: 0}
max_restarts: 0
"""


class Store:
    """What the deleter and the reconciler ask of the checkpoint store, in memory."""

    def __init__(self) -> None:
        self.held: dict[str, str] = {}  # uuid -> created_at
        self.deleted: list[str] = []
        self.listing_hides: set[str] = set()  # uploaded after the listing was taken
        self.unchecked: set[str] = set()  # their storage cannot be reached to check their files
        self.asked = threading.Event()  # get() was called
        self.answer = threading.Event()  # ... and may answer now
        self.answer.set()

    def upload(self) -> str:
        u = str(uuid.uuid4())
        self.held[u] = utc_now()
        return u

    def delete(self, u: str) -> None:
        if self.held.pop(u, None) is None:
            raise CheckpointNotFound(f"checkpoint {u} not found")
        self.deleted.append(u)

    def list(self) -> list[common_pb2.Checkpoint]:
        return [
            common_pb2.Checkpoint(uuid=u, experiment_id=1, created_at=at)
            for u, at in self.held.items()
            if u not in self.listing_hides
        ]

    def missing_files(self, u: str) -> list[str]:
        if u in self.unchecked:
            raise CheckpointError(f"checkpoint storage failed: {u}'s bucket is unreachable")
        if u not in self.held:
            raise CheckpointNotFound(f"checkpoint {u} not found")
        return []

    def get(self, u: str) -> common_pb2.Checkpoint:
        self.asked.set()
        self.answer.wait(10)
        if u not in self.held:
            raise CheckpointNotFound(f"checkpoint {u} not found")
        return common_pb2.Checkpoint(uuid=u)


def on_loop(test: Callable[[Path], Awaitable[None]]) -> Callable[[Path], None]:
    def run(tmp_path: Path) -> None:
        asyncio.run(test(tmp_path))

    run.__name__ = test.__name__
    return run


def start(tmp_path: Path) -> tuple[Scenario, Store]:
    s = Scenario(tmp_path / "pedl.db", slots=1)
    store = Store()
    s.manager.checkpoints.deleter._client = store  # type: ignore[assignment]
    s.manager.create_experiment(CONFIG, b"model", "model")
    s.manager.tick(0)
    return s, store


def answers(s: Scenario, store: Store, workloads: list[common_pb2.Workload]) -> list:
    """The harness's messages for `workloads`; the validation at 10 batches is the trial's best."""
    out = []
    for w in workloads:
        kind = KIND_NAMES[w.kind]
        if kind is Kind.TERMINATE:
            exited = agent_pb2.TrialExited(trial_id=w.trial_id, run_id=w.run_id)
            out.append((s.agent, agent_pb2.ConnectRequest(trial_exited=exited)))
            continue
        result = common_pb2.WorkloadResult(workload=w, num_batches=10)
        if kind is Kind.RUN_STEP:
            result.metrics.CopyFrom(to_struct({"loss": 0.5}))
        elif kind is Kind.COMPUTE_VALIDATION_METRICS:
            result.metrics.CopyFrom(to_struct({"error": 0.1 if w.total_batches == 10 else 0.9}))
        else:
            result.checkpoint.CopyFrom(common_pb2.Checkpoint(uuid=store.upload(), trial_id=w.trial_id))
        completed = agent_pb2.WorkloadCompleted(result=result)
        out.append((s.agent, agent_pb2.ConnectRequest(workload_completed=completed)))
    return out


def checkpoint_states(s: Scenario) -> dict[str, str]:
    return {r["uuid"]: r["state"] for r in stored.rows(s.manager.db, "SELECT uuid, state FROM checkpoints")}


async def settle() -> None:
    """Lets the deleter's background task run to its end (the store is asked from a thread)."""
    for _ in range(50):
        await asyncio.sleep(0.01)


def first_batch(s: Scenario, store: Store) -> list:
    batch = s.workloads(s.sent())
    s.manager.on_agent_messages(answers(s, store, batch))
    last = s.workloads(s.sent())
    assert [KIND_NAMES[w.kind] for w in last][-1] is Kind.TERMINATE
    return last


@on_loop
async def test_a_checkpoint_doomed_by_a_batch_that_fails_to_commit_is_not_deleted(tmp_path: Path) -> None:
    s, store = start(tmp_path)
    last = first_batch(s, store)
    db = s.manager.db

    def failing_commit(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    # The last batch records the worse checkpoint at 20 batches and ends the trial, whose garbage
    # collection dooms that very checkpoint; then its commit fails, so no row of it exists.
    db._commit = failing_commit  # type: ignore[method-assign]
    with pytest.raises(sqlite3.OperationalError):
        s.manager.on_agent_messages(answers(s, store, last))
    del db._commit
    await settle()
    assert store.deleted == []  # the store deleted nothing the scheduler never recorded
    assert set(checkpoint_states(s).values()) == {"COMPLETED"}
    s.manager.db.close()


@on_loop
async def test_a_deletion_that_comes_before_the_checkpoints_row_leaves_it_alone(tmp_path: Path) -> None:
    s, store = start(tmp_path)
    last = first_batch(s, store)
    messages = answers(s, store, last)
    results = [m.workload_completed.result for _, m in messages if m.HasField("workload_completed")]
    (ckpt,) = [r.checkpoint.uuid for r in results if r.checkpoint.uuid]
    # The deleter is asked for the checkpoint before the result that records it is written (a
    # ledger that heard of it in a transaction that then failed, or a result delivered again).
    await s.manager.checkpoints.deleter.delete_now([ckpt])
    assert store.deleted == []
    s.manager.on_agent_messages(messages)  # now recorded; the trial's end dooms it under the policy
    await settle()
    # It is deleted the proper way, and its row says so: never COMPLETED without its bytes.
    assert store.deleted == [ckpt]
    assert checkpoint_states(s)[ckpt] == "DELETED"
    completed = [u for u, state in checkpoint_states(s).items() if state == "COMPLETED"]
    assert completed and all(u in store.held for u in completed)
    s.manager.db.close()


@on_loop
async def test_a_deletion_during_the_reconcilers_question_ends_deleted_not_lost(tmp_path: Path) -> None:
    s, store = start(tmp_path)
    first_batch(s, store)
    (ckpt,) = checkpoint_states(s)
    store.listing_hides.add(ckpt)  # stored after the reconciler's listing: it asks the store again
    store.answer.clear()
    deleter = s.manager.checkpoints.deleter
    reconciler = CheckpointReconciler(s.manager.db, deleter, s.manager.checkpoints.mark, grace_seconds=0)
    reconciling = asyncio.get_running_loop().create_task(reconciler.run_once())
    while not store.asked.is_set():
        await asyncio.sleep(0.01)
    await deleter.delete_now([ckpt])  # a user's delete (or garbage collection) while it waits
    store.answer.set()
    todo = await reconciling
    assert store.deleted == [ckpt]
    assert checkpoint_states(s)[ckpt] == "DELETED"
    assert todo.maybe_missing == [] and ckpt not in s.manager.state.lost_checkpoints
    s.manager.db.close()


def test_checkpoint_states_move_only_from_the_states_they_follow(database_url: str) -> None:
    """On SQLite and PostgreSQL: a row not yet written is never moved, a deletion ends only a DELETING
    row, and the reconciler's MISSING and COMPLETED only undo each other."""
    from pedl_scheduler.storage import open_storage
    from pedl_scheduler.storage.ops import experiments as experiment_ops
    from pedl_scheduler.storage.ops import results as result_ops
    from pedl_scheduler.storage.ops import trials as trial_ops

    s = open_storage(database_url)
    exp_id = experiment_ops.create_experiment(
        s, config_yaml="y", config_json="{}", model_definition=b"m", model_definition_name="model",
        seed=1, created_at="t0", owner="ann",
    )  # fmt: skip
    trial_ops.create_trial(s, exp_id, "a", "{}", 1, "{}")
    (trial,) = [r["id"] for r in trial_ops.newest_trials(s, exp_id, 1)]
    for u in ("done", "gone", "lost"):
        result_ops.record_checkpoint(s, u, trial, 1, 100, "{}", "t1")
    s.flush()
    move = result_ops.move_checkpoints
    assert sorted(move(s, ["done", "gone", "not-yet-written"], "DELETING")) == ["done", "gone"]
    assert move(s, [], "DELETING") == []
    assert move(s, ["gone"], "DELETED") == ["gone"]
    assert move(s, ["gone", "lost"], "MISSING") == ["lost"]  # a deleted one is not "lost"
    assert move(s, ["lost", "done"], "COMPLETED") == ["lost"]  # DELETING stays DELETING
    assert move(s, ["lost"], "DELETED") == []  # only a deletion in progress ends
    states = {r["uuid"]: r["state"] for r in result_ops.checkpoint_states(s)}
    assert states == {"done": "DELETING", "gone": "DELETED", "lost": "COMPLETED"}
    s.close()


@on_loop
async def test_a_checkpoint_whose_files_cannot_be_checked_holds_up_no_other_repair(tmp_path: Path) -> None:
    s, store = start(tmp_path)
    s.manager.on_agent_messages(answers(s, store, first_batch(s, store)))
    await settle()
    states = checkpoint_states(s)
    (kept,) = [u for u, state in states.items() if state == "COMPLETED"]
    (deleted,) = [u for u, state in states.items() if state == "DELETED"]
    store.held[deleted] = utc_now()  # the store lists a deleted checkpoint again
    store.unchecked.add(kept)
    deleter = s.manager.checkpoints.deleter
    reconciler = CheckpointReconciler(s.manager.db, deleter, s.manager.checkpoints.mark, grace_seconds=0)
    todo = await reconciler.run_once()
    assert todo.delete_again == [deleted] and deleted not in store.held
    assert todo.files_missing == [] and checkpoint_states(s)[kept] == "COMPLETED"
    s.manager.db.close()
