"""Agent messages in batches: one transaction per batch, nothing sent before it commits, workloads
sent ahead where they are already decided, and a freed slot used at once."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pedl._metrics import to_struct
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler import searcher_journal
from pedl_scheduler.agent_link import BATCH_MAX_MESSAGES, Inbox, _take_batch
from pedl_scheduler.cluster import CLOSE_STREAM, AgentHandle, Cluster
from pedl_scheduler.experiments import KIND_NAMES, ExperimentManager
from pedl_scheduler.storage import open_storage
from support import stored

RANDOM = """
hyperparameters: {{x: {{type: double, minval: 0, maxval: 1}}}}
searcher: {{name: random, metric: error, max_trials: {trials}, max_length: {{batches: {length}}},
           max_concurrent_trials: {concurrent}}}
batches_per_step: {per_step}
max_restarts: 0
"""


def config(trials: int = 1, concurrent: int = 1, length: int = 20, per_step: int = 10) -> str:
    return RANDOM.format(trials=trials, concurrent=concurrent, length=length, per_step=per_step)


class Scenario:
    """A manager on a SQLite file with one agent; plays the agent's harnesses by hand."""

    def __init__(self, path: Path, slots: int = 1, handoffs: bool = False) -> None:
        self.path = path
        self.cluster = Cluster()
        self.agent = self.cluster.connect(
            agent_pb2.RegisterAgent(
                agent_id="a0",
                slots=[common_pb2.Slot(id=str(i)) for i in range(slots)],
                accepts_handoffs=handoffs,
            )
        )
        self.manager = ExperimentManager(open_storage(str(path)), self.cluster, "127.0.0.1:1")

    def sent(self) -> list[agent_pb2.ConnectResponse]:
        out = []
        while not self.agent.outbox.empty():
            message = self.agent.outbox.get_nowait()
            out.extend(message.batch.messages if message.WhichOneof("message") == "batch" else [message])
        return out

    @staticmethod
    def workloads(messages: list[agent_pb2.ConnectResponse]) -> list[common_pb2.Workload]:
        return [m.run_workload.workload for m in messages if m.WhichOneof("message") == "run_workload"]

    def answers(self, workloads: list[common_pb2.Workload], error: float = 0.25) -> list:
        """The messages a harness sends for `workloads`, in order."""
        out = []
        for w in workloads:
            kind = KIND_NAMES[w.kind]
            if kind is Kind.TERMINATE:
                exited = agent_pb2.TrialExited(trial_id=w.trial_id, run_id=w.run_id)
                out.append((self.agent, agent_pb2.ConnectRequest(trial_exited=exited)))
                continue
            result = common_pb2.WorkloadResult(workload=w, num_batches=10)
            if kind is Kind.RUN_STEP:
                result.metrics.CopyFrom(to_struct({"loss": 0.5}))
            elif kind is Kind.COMPUTE_VALIDATION_METRICS:
                result.metrics.CopyFrom(to_struct({"error": error}))
            else:
                result.checkpoint.CopyFrom(common_pb2.Checkpoint(uuid=str(uuid.uuid4()), trial_id=w.trial_id))
            completed = agent_pb2.WorkloadCompleted(result=result)
            out.append((self.agent, agent_pb2.ConnectRequest(workload_completed=completed)))
        return out

    @property
    def commits(self) -> int:
        return self.manager.db.commits

    def rows(self, sql: str, **params: object) -> list[dict]:
        return stored.rows(self.manager.db, sql, **params)


def kinds(workloads: list[common_pb2.Workload]) -> list[tuple[str, int]]:
    return [(KIND_NAMES[w.kind].value, w.total_batches) for w in workloads]


def last_step_to_exit(batches: int) -> list[tuple[str, int]]:
    """A closed trial's last step and everything after it, sent together."""
    return [
        (kind, batches)
        for kind in ("RUN_STEP", "COMPUTE_VALIDATION_METRICS", "CHECKPOINT_MODEL", "TERMINATE")
    ]


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Scenario]:
    s = Scenario(tmp_path / "pedl.db", slots=4)
    yield s
    s.manager.db.close()


def run(coro_fn) -> None:
    asyncio.run(coro_fn())


def test_results_that_arrive_together_are_one_transaction_and_survive_a_scheduler_kill(tmp_path) -> None:
    async def scenario() -> None:
        s = Scenario(tmp_path / "pedl.db", slots=4)
        s.manager.create_experiment(config(trials=4, concurrent=4, length=30), b"model", "model")
        s.manager.tick(0)
        steps = s.workloads(s.sent())
        assert kinds(steps) == [("RUN_STEP", 10)] * 4
        before = s.commits
        s.manager.on_agent_messages(s.answers(steps))
        assert s.commits == before + 1  # four trials' results, one commit
        assert kinds(s.workloads(s.sent())) == [("RUN_STEP", 20)] * 4
        s.manager.db.close()  # the scheduler dies (kill -9): nothing else is written

        restarted = Scenario(tmp_path / "pedl.db", slots=4)
        restarted.manager.recover()
        stored = restarted.rows("SELECT trial_id, total_batches FROM steps ORDER BY trial_id")
        assert [r["total_batches"] for r in stored] == [10, 10, 10, 10]
        assert {t.sequencer.batches_trained for t in restarted.manager.trials.values()} == {10}
        restarted.manager.db.close()

    run(scenario)


def test_nothing_a_batch_decided_is_sent_when_its_commit_fails(scenario: Scenario) -> None:
    async def body() -> None:
        s = scenario
        s.manager.create_experiment(config(length=30), b"model", "model")
        s.manager.tick(0)
        steps = s.workloads(s.sent())
        db = s.manager.db

        def failing_commit(*args, **kwargs) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        db._commit = failing_commit  # type: ignore[method-assign]
        with pytest.raises(sqlite3.OperationalError):
            s.manager.on_agent_messages(s.answers(steps))
        del db._commit
        assert s.sent() == []  # the next step was decided, but never left
        assert s.rows("SELECT * FROM steps") == []

    run(body)


def test_a_trial_closed_up_front_gets_its_last_step_validation_checkpoint_and_terminate_at_once(
    scenario: Scenario,
) -> None:
    async def body() -> None:
        s = scenario
        exp_id = s.manager.create_experiment(config(length=20), b"model", "model")
        s.manager.tick(0)
        sends = []
        batch = s.workloads(s.sent())
        while batch:
            sends.append(kinds(batch))
            s.manager.on_agent_messages(s.answers(batch, error=0.125))
            batch = s.workloads(s.sent())
        # `random` closes each trial when it creates it: nothing after the last validation waits for
        # the searcher to hear it.
        assert sends == [[("RUN_STEP", 10)], last_step_to_exit(20)]
        (trial,) = s.rows("SELECT state, best_validation FROM trials")
        assert trial == {"state": "COMPLETED", "best_validation": 0.125}
        assert s.rows("SELECT state FROM experiments WHERE id = :id", id=exp_id) == [{"state": "COMPLETED"}]

    run(body)


def test_a_trial_exit_starts_the_next_queued_trial_at_once(tmp_path) -> None:
    async def body() -> None:
        s = Scenario(tmp_path / "pedl.db", slots=1)
        s.manager.create_experiment(config(trials=2, concurrent=2, length=10), b"model", "model")
        s.manager.tick(0)
        messages = s.sent()
        first = messages[0].start_trial.trial_id
        batch = s.workloads(messages)
        while not any(KIND_NAMES[w.kind] is Kind.TERMINATE for w in batch):
            s.manager.on_agent_messages(s.answers(batch))
            batch = s.workloads(s.sent())
        s.manager.on_agent_messages(s.answers(batch))  # checkpoint result and exit; no tick after
        (start,) = [m.start_trial for m in s.sent() if m.WhichOneof("message") == "start_trial"]
        assert start.trial_id != first
        s.manager.db.close()

    run(body)


def test_a_nan_searcher_metric_is_stored_and_never_becomes_the_best(scenario: Scenario) -> None:
    """As Determined: a NaN validation is kept and the trial goes on; it ranks nothing."""

    async def body() -> None:
        s = scenario
        s.manager.create_experiment(config(trials=2, concurrent=2, length=10), b"model", "model")
        s.manager.tick(0)
        batch = s.workloads(s.sent())
        assert kinds(batch) == last_step_to_exit(10) * 2
        nan, good = s.answers(batch[:4], error=float("nan")), s.answers(batch[4:], error=0.5)
        s.manager.on_agent_messages(nan + good)
        rows = s.rows("SELECT id, state, best_validation FROM trials")
        trials = {r["id"]: (r["state"], r["best_validation"]) for r in rows}
        assert trials[batch[0].trial_id] == ("COMPLETED", None)
        assert trials[batch[4].trial_id] == ("COMPLETED", 0.5)
        validations = s.rows("SELECT trial_id, metrics_json FROM validations ORDER BY trial_id")
        assert [(r["trial_id"], r["metrics_json"]) for r in validations] == [
            (batch[0].trial_id, '{"error": NaN}'),
            (batch[4].trial_id, '{"error": 0.5}'),
        ]

    run(body)


def test_a_run_adopted_busy_after_a_reconnect_is_sent_nothing_until_its_next_result(
    scenario: Scenario,
) -> None:
    async def body() -> None:
        s = scenario
        s.manager.create_experiment(config(length=20), b"model", "model")
        s.manager.tick(0)
        (step,) = s.workloads(s.sent())
        s.manager.on_agent_disconnected("a0")  # the agent's stream broke while the step ran
        agent = s.cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0")]))
        s.agent = agent
        running = agent_pb2.RunningTrial(
            trial_id=step.trial_id, run_id=step.run_id, slot_ids=["0"], busy=True
        )
        s.manager.on_agent_registered(agent, [running])
        assert s.workloads(s.sent()) == []  # it may hold workloads this scheduler does not know of
        s.manager.on_agent_messages(s.answers([step]))
        assert kinds(s.workloads(s.sent())) == last_step_to_exit(20)

    run(body)


def test_the_inbox_hands_over_what_arrived_together_as_one_batch_in_order() -> None:
    async def body() -> None:
        handled: list[list] = []
        inbox = Inbox(lambda batch: handled.append([m.trial_exited.trial_id for _, m in batch]))
        a, b = (AgentHandle(name, name, "", "default", [], []) for name in ("a", "b"))
        for agent, trial in ((a, 1), (b, 2), (a, 3)):
            inbox.put(agent, agent_pb2.ConnectRequest(trial_exited=agent_pb2.TrialExited(trial_id=trial)))
        await asyncio.sleep(0)
        inbox.put(b, agent_pb2.ConnectRequest(trial_exited=agent_pb2.TrialExited(trial_id=4)))
        await asyncio.sleep(0)
        assert handled == [[1, 2, 3], [4]]

    run(body)


def test_a_batch_that_fails_closes_the_streams_of_the_agents_that_sent_it() -> None:
    async def body() -> None:
        def fail(batch) -> None:
            raise RuntimeError("boom")

        inbox = Inbox(fail)
        agent = AgentHandle("a", "a", "", "default", [], [])
        inbox.put(agent, agent_pb2.ConnectRequest(trial_exited=agent_pb2.TrialExited(trial_id=1)))
        await asyncio.sleep(0)
        assert agent.outbox.get_nowait() is CLOSE_STREAM

    run(body)


def test_queued_messages_to_an_agent_go_as_one_batch_up_to_a_close() -> None:
    queue: asyncio.Queue = asyncio.Queue()
    first = agent_pb2.ConnectResponse(kill_trial=agent_pb2.KillTrial(trial_id=1))
    for trial in range(2, BATCH_MAX_MESSAGES + 3):
        queue.put_nowait(agent_pb2.ConnectResponse(kill_trial=agent_pb2.KillTrial(trial_id=trial)))
    batch, closing = _take_batch(queue, first)
    assert [m.kill_trial.trial_id for m in batch.batch.messages] == list(range(1, BATCH_MAX_MESSAGES + 1))
    assert not closing and queue.qsize() == 2
    queue.put_nowait(CLOSE_STREAM)
    batch, closing = _take_batch(queue, queue.get_nowait())
    assert len(batch.batch.messages) == 2 and closing


def test_a_nan_training_loss_is_stored_as_reported(scenario: Scenario) -> None:
    async def body() -> None:
        s = scenario
        s.manager.create_experiment(config(length=20), b"model", "model")
        s.manager.tick(0)
        (step,) = s.workloads(s.sent())
        (answer,) = s.answers([step])
        answer[1].workload_completed.result.metrics.CopyFrom(to_struct({"loss": float("nan")}))
        s.manager.on_agent_messages([answer])
        (row,) = s.rows("SELECT metrics_json FROM steps")
        assert row["metrics_json"] == '{"loss": NaN}'
        assert kinds(s.workloads(s.sent())) == last_step_to_exit(20)

    run(body)


def starts(messages: list[agent_pb2.ConnectResponse]) -> list[tuple[int, list[tuple[int, int]]]]:
    """(trial id, the runs it waits for) of each StartTrial."""
    return [
        (m.start_trial.trial_id, [(r.trial_id, r.run_id) for r in m.start_trial.after])
        for m in messages
        if m.WhichOneof("message") == "start_trial"
    ]


def test_a_queued_trial_is_handed_the_slot_of_a_run_told_to_terminate(tmp_path) -> None:
    async def body() -> None:
        s = Scenario(tmp_path / "pedl.db", slots=1, handoffs=True)
        s.manager.create_experiment(config(trials=3, concurrent=3, length=10), b"model", "model")
        s.manager.tick(0)
        first = s.sent()
        assert starts(first) == [(1, [])]
        assert s.manager.wake.is_set()  # trial 1 was told to terminate while others wait
        s.manager.tick(0)
        second = s.sent()
        assert starts(second) == [(2, [(1, 1)])]  # the agent starts it as trial 1's run exits
        assert kinds(s.workloads(second)) == kinds(s.workloads(first))  # its workloads go along
        assert (s.agent.used, s.agent.next) == ({"0": 1}, {"0": 2})
        # The policy sees the slot as trial 2's (its experiment's share), no longer as trial 1's.
        assert [(t.trial_id, t.slots) for t in s.manager.scheduling.cluster_state().running] == [(2, 1)]
        s.manager.tick(0)
        assert s.sent() == []  # one trial waits per slot: trial 3 waits for a slot of its own
        s.manager.on_agent_messages(s.answers(s.workloads(first)))
        assert starts(s.sent()) == [(3, [(2, 1)])]
        assert (s.agent.used, s.agent.next) == ({"0": 2}, {"0": 3})
        rows = s.rows("SELECT id, state FROM trials ORDER BY id")
        assert [(r["id"], r["state"]) for r in rows] == [(1, "COMPLETED"), (2, "ACTIVE"), (3, "ACTIVE")]
        logs = [r["message"] for r in s.rows("SELECT message FROM trial_logs WHERE trial_id = 2")]
        assert any("taking them over from trial 1 as it exits" in m for m in logs)

    run(body)


def test_an_agent_without_handoffs_gets_a_trial_only_once_the_slot_is_free(tmp_path) -> None:
    async def body() -> None:
        s = Scenario(tmp_path / "pedl.db", slots=1, handoffs=False)
        s.manager.create_experiment(config(trials=2, concurrent=2, length=10), b"model", "model")
        s.manager.tick(0)
        first = s.sent()
        s.manager.tick(0)
        assert s.sent() == []
        s.manager.on_agent_messages(s.answers(s.workloads(first)))
        assert starts(s.sent()) == [(2, [])]

    run(body)


def test_a_handed_off_trial_killed_before_it_started_gives_the_slot_back(tmp_path) -> None:
    async def body() -> None:
        s = Scenario(tmp_path / "pedl.db", slots=1, handoffs=True)
        exp_id = s.manager.create_experiment(config(trials=2, concurrent=2, length=10), b"model", "model")
        s.manager.tick(0)
        first = s.sent()
        s.manager.tick(0)
        s.sent()
        s.manager.kill_experiment(exp_id)
        killed = [(m.kill_trial.trial_id, m.kill_trial.run_id) for m in s.sent() if m.HasField("kill_trial")]
        assert sorted(killed) == [(1, 1), (2, 1)]
        exits = [
            (
                s.agent,
                agent_pb2.ConnectRequest(
                    trial_exited=agent_pb2.TrialExited(trial_id=t, run_id=1, killed=True)
                ),
            )
            for t in (2, 1)  # the waiting run ends first: it never started a harness
        ]
        s.manager.on_agent_messages(exits[:1])
        assert (s.agent.used, s.agent.next) == ({"0": 1}, {})
        s.manager.on_agent_messages(exits[1:])
        assert (s.agent.used, s.agent.next) == ({}, {})
        assert first  # trial 1 had started normally

    run(body)


def test_a_search_that_queues_many_trials_starts_them_oldest_first(tmp_path) -> None:
    async def body() -> None:
        s = Scenario(tmp_path / "pedl.db", slots=2, handoffs=True)
        s.manager.create_experiment(config(trials=60, concurrent=0, length=10), b"model", "model")
        queued = s.manager.scheduling.cluster_state().queued
        assert len(queued) == 2 * 2 + 1  # what one pass could place, no more
        started: list[int] = []
        while len(started) < 20:
            s.manager.tick(0)
            sent = s.sent()
            started += [t for t, _ in starts(sent)]
            s.manager.on_agent_messages(s.answers(s.workloads(sent)))
        assert started == list(range(1, len(started) + 1))

    run(body)


ASHA = """
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: adaptive_asha, metric: error, max_trials: 16, max_length: {batches: 40}, divisor: 2,
           max_concurrent_trials: 4}
batches_per_step: 10
max_restarts: 0
"""


def test_a_restarted_scheduler_rebuilds_a_journaled_searcher_exactly(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(searcher_journal, "SMALL_SNAPSHOT_BYTES", 0)  # as for a large search
    monkeypatch.setattr(searcher_journal, "EVENTS_PER_SNAPSHOT", 40)

    async def body() -> None:
        s = Scenario(tmp_path / "pedl.db", slots=4)
        exp_id = s.manager.create_experiment(ASHA, b"model", "model")
        for _ in range(6):
            s.manager.tick(0)
            s.manager.on_agent_messages(s.answers(s.workloads(s.sent()), error=0.3))
        assert s.rows("SELECT COUNT(*) AS n FROM searcher_events")[0]["n"] > 0
        live = s.manager.experiments[exp_id].searcher.snapshot()
        again = ExperimentManager(open_storage(str(s.path)), Cluster(), "127.0.0.1:1")
        again.recover()
        assert again.experiments[exp_id].searcher.snapshot() == live
        assert again.experiments[exp_id].journal.seq == s.manager.experiments[exp_id].journal.seq
        again.db.close()
        s.manager.db.close()

    run(body)
