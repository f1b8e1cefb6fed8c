"""The agent's side of batching: several queued messages go as one to a scheduler that accepts
batches (and one by one to one that does not), and a workload the run already holds is not queued
twice when a scheduler re-sends it."""

from __future__ import annotations

import asyncio

import grpc

from pedl.v1 import agent_pb2, common_pb2, harness_pb2
from pedl_agent.harness_service import HarnessServicer
from pedl_agent.link import SchedulerLink
from pedl_agent.outbox import Outbox
from pedl_scheduler.agent_protocol import SCHEDULER_PROTOCOL


def result(trial_id: int, step: int) -> agent_pb2.ConnectRequest:
    w = common_pb2.Workload(kind=common_pb2.WORKLOAD_KIND_RUN_STEP, trial_id=trial_id, step_id=step)
    return agent_pb2.ConnectRequest(
        workload_completed=agent_pb2.WorkloadCompleted(result=common_pb2.WorkloadResult(workload=w))
    )


def logs(n: int) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(trial_logs=agent_pb2.TrialLogs(trial_id=n))


class FakeCall:
    """The agent's end of the stream: what it reads is scripted, what it writes is recorded."""

    def __init__(self, replies: list[agent_pb2.ConnectResponse]) -> None:
        self.replies = list(replies)
        self.written: list[agent_pb2.ConnectRequest] = []

    async def read(self):
        if self.replies:
            return self.replies.pop(0)
        await asyncio.sleep(3600)

    async def write(self, message: agent_pb2.ConnectRequest) -> None:
        self.written.append(message)


class FakeAgent:
    def __init__(self) -> None:
        self.handled: list[agent_pb2.ConnectResponse] = []

    def handle(self, message: agent_pb2.ConnectResponse) -> None:
        self.handled.append(message)


async def session(accepts_batches: bool, outbox: Outbox) -> tuple[FakeCall, FakeAgent]:
    registered = agent_pb2.ConnectResponse(
        registered=agent_pb2.AgentRegistered(
            heartbeat_interval_seconds=60, accepts_batches=accepts_batches, protocol=SCHEDULER_PROTOCOL
        )
    )
    kills = agent_pb2.ConnectResponse(
        batch=agent_pb2.ConnectResponseBatch(
            messages=[agent_pb2.ConnectResponse(kill_trial=agent_pb2.KillTrial(trial_id=t)) for t in (1, 2)]
        )
    )
    call, agent = FakeCall([registered, kills]), FakeAgent()
    link = SchedulerLink("unused:1", agent, outbox)  # type: ignore[arg-type]
    ready, interval = asyncio.Event(), [60.0]
    reader = asyncio.ensure_future(link._read(call, ready, interval))  # type: ignore[arg-type]
    writer = asyncio.ensure_future(link._write(call, ready, interval))  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    reader.cancel()
    writer.cancel()
    return call, agent


def test_queued_messages_go_as_one_batch_to_a_scheduler_that_accepts_batches() -> None:
    async def scenario() -> None:
        outbox = Outbox()
        for message in (result(1, 1), logs(1), result(2, 1)):
            outbox.put(message)
        call, agent = await session(True, outbox)
        (batch,) = call.written
        assert list(batch.batch.messages) == [result(1, 1), logs(1), result(2, 1)]
        assert len(outbox) == 0
        assert [m.kill_trial.trial_id for m in agent.handled] == [1, 2]  # a batch is handled in order

    asyncio.run(scenario())


def test_an_older_scheduler_gets_one_message_at_a_time() -> None:
    async def scenario() -> None:
        outbox = Outbox()
        for message in (result(1, 1), result(2, 1)):
            outbox.put(message)
        call, _ = await session(False, outbox)
        assert call.written == [result(1, 1), result(2, 1)]

    asyncio.run(scenario())


def test_peek_many_respects_its_bounds_and_pop_many_removes_exactly_what_was_sent() -> None:
    async def scenario() -> None:
        box = Outbox(max_messages=4)
        for message in (logs(1), result(1, 1), result(1, 2)):
            box.put(message)
        assert box.peek_many(max_messages=2, max_bytes=1 << 20) == [logs(1), result(1, 1)]
        sent = box.peek_many(max_messages=10, max_bytes=1)  # at least one, however large
        assert sent == [logs(1)]
        sent = box.peek_many(max_messages=10, max_bytes=1 << 20)
        box.put(result(2, 1))
        box.put(result(2, 2))  # full: the oldest log batch, one of those being sent, is dropped
        box.pop_many(sent)
        assert [m.workload_completed.result.workload.trial_id for m in box._items] == [2, 2]

    asyncio.run(scenario())


class FakeContext:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise RuntimeError(f"{code.name}: {details}")


def test_a_re_sent_workload_the_run_holds_is_not_queued_twice() -> None:
    async def scenario() -> None:
        results: list[common_pb2.WorkloadResult] = []
        svc = HarnessServicer(agent_pb2.StartTrial(trial_id=5, run_id=3), results.append)
        step = common_pb2.Workload(
            kind=common_pb2.WORKLOAD_KIND_RUN_STEP, trial_id=5, run_id=3, step_id=2, total_batches=20
        )
        validation = common_pb2.Workload(
            kind=common_pb2.WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS,
            trial_id=5,
            run_id=3,
            step_id=2,
            total_batches=20,
        )
        assert svc.add_workload(step) and svc.add_workload(validation)
        got = await svc.NextWorkload(harness_pb2.NextWorkloadRequest(), FakeContext())
        # A scheduler that adopted the busy run re-sends what it would send after the step.
        assert svc.add_workload(validation)
        assert svc.queued == 1
        await svc.CompleteWorkload(
            harness_pb2.CompleteWorkloadRequest(result=common_pb2.WorkloadResult(workload=got.workload)),
            FakeContext(),
        )
        assert svc.add_workload(step) and svc.queued == 2  # done: a re-send is run again

    asyncio.run(scenario())
