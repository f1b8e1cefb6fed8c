"""Every checkpoint deletion is listed as Determined lists it: a "Checkpoint GC (Experiment N)" task per
experiment, open from the moment its rows are DELETING until the store has deleted its files.

The store is an in-memory stand-in for the deleter's client that holds each deletion until the test
lets it answer (the real store is exercised in tests/integration/test_checkpoint_lifecycle.py).
"""

from __future__ import annotations

import asyncio
import threading

from pedl.checkpoints import CheckpointError, CheckpointNotFound
from pedl_scheduler.checkpoint_deleter import COMPLETED, DELETED, DELETING, CheckpointDeleter
from pedl_scheduler.storage.ops.results import CHECKPOINT_MOVES

OWNERS = {"a1": 1, "a2": 1, "b1": 2, "c1": 3}


class Store:
    def __init__(self) -> None:
        self.held = set(OWNERS)
        self.go = threading.Event()  # deletions answer once set
        self.broken: set[str] = set()

    def delete(self, uuid: str) -> None:
        assert self.go.wait(10)
        if uuid in self.broken:
            raise CheckpointError(f"storage unreachable for {uuid}")
        if uuid not in self.held:
            raise CheckpointNotFound(uuid)
        self.held.discard(uuid)


class Rows:
    def __init__(self) -> None:
        self.state = dict.fromkeys(OWNERS, COMPLETED)

    def mark(self, uuids: list[str], state: str) -> list[str]:
        moved = [u for u in uuids if self.state.get(u) in CHECKPOINT_MOVES[state]]  # as the database
        self.state.update(dict.fromkeys(moved, state))
        return moved

    def experiment_of(self, uuids: list[str]) -> dict[str, int]:
        return {u: OWNERS[u] for u in uuids}


def deleter_for(rows: Rows, store: Store) -> CheckpointDeleter:
    deleter = CheckpointDeleter("unused:0", rows.mark, rows.experiment_of)
    deleter._client = store  # type: ignore[assignment]
    return deleter


def listed(deleter: CheckpointDeleter) -> list[tuple[str, list[str], bool]]:
    return [(t.name, t.checkpoint_uuids, t.running) for t in deleter.tasks.listing()]


async def until(condition: object, seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.01)):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met")


def test_a_users_delete_answers_with_one_gc_task_per_experiment_listed_until_its_files_are_gone() -> None:
    async def scenario() -> None:
        rows, store = Rows(), Store()
        deleter = deleter_for(rows, store)
        deleter.start(["b1", "a1", "a2"])
        # Listed when the request answers: rows DELETING, one task per experiment, in experiment order.
        assert rows.state == {"a1": DELETING, "a2": DELETING, "b1": DELETING, "c1": COMPLETED}
        assert [(n, u) for n, u, _ in listed(deleter)] == [
            ("Checkpoint GC (Experiment 1)", ["a1", "a2"]),
            ("Checkpoint GC (Experiment 2)", ["b1"]),
        ]
        await until(lambda: listed(deleter)[0][2])
        assert [r for _, _, r in listed(deleter)] == [True, False]  # a deletion's tasks one by one
        store.go.set()
        await until(lambda: not listed(deleter))
        assert rows.state == {"a1": DELETED, "a2": DELETED, "b1": DELETED, "c1": COMPLETED}
        assert store.held == {"c1"}

    asyncio.run(scenario())


def test_a_failing_store_ends_the_task_and_leaves_the_rows_deleting_for_a_retry() -> None:
    async def scenario() -> None:
        rows, store = Rows(), Store()
        store.broken.add("a1")
        store.go.set()
        deleter = deleter_for(rows, store)
        deleter.delete(["a1", "a2", "c1"])  # garbage collection: failures are logged, not raised
        await until(lambda: rows.state["c1"] == DELETED and not listed(deleter))
        assert rows.state == {"a1": DELETING, "a2": DELETED, "b1": COMPLETED, "c1": DELETED}
        store.broken.clear()
        deleter.delete(["a1"])  # the next collection offers it again
        await until(lambda: rows.state["a1"] == DELETED and not listed(deleter))

    asyncio.run(scenario())


def test_a_deletion_that_waits_for_its_files_ends_its_tasks_whatever_the_store_answers() -> None:
    async def scenario() -> None:
        rows, store = Rows(), Store()
        store.go.set()
        store.broken.add("a2")
        deleter = deleter_for(rows, store)
        try:
            await deleter.delete_now(["a1", "a2", "b1"])
        except CheckpointError as e:
            assert "a2" in str(e)
        else:
            raise AssertionError("the store's failure was not raised")
        assert listed(deleter) == []
        assert rows.state == {"a1": DELETED, "a2": DELETING, "b1": DELETING, "c1": COMPLETED}

    asyncio.run(scenario())
