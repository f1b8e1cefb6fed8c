"""The agent's stream-independent logic: message routing, the outbox, log batching, HarnessService."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from pedl.v1 import agent_pb2, common_pb2, harness_pb2
from pedl_agent.agent import Agent
from pedl_agent.config import parse_args
from pedl_agent.harness_service import HarnessServicer
from pedl_agent.log_relay import MAX_LINE_BYTES, LogRelay, iter_lines
from pedl_agent.outbox import Outbox


def wl(trial_id: int, run_id: int, step: int = 1) -> common_pb2.Workload:
    return common_pb2.Workload(
        kind=common_pb2.WORKLOAD_KIND_RUN_STEP, trial_id=trial_id, run_id=run_id, step_id=step
    )


def logs(n: int) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(
        trial_logs=agent_pb2.TrialLogs(trial_id=n, lines=[common_pb2.LogLine(message=str(n))])
    )


def exited(trial_id: int) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(trial_exited=agent_pb2.TrialExited(trial_id=trial_id))


class FakeRun:
    def __init__(self, start: agent_pb2.StartTrial) -> None:
        self.start = start
        self.workloads: list[common_pb2.Workload] = []
        self.kills: list[tuple[bool, str]] = []
        self.finish = asyncio.Event()
        self.busy = False
        self.waiting = False
        self.after: list[asyncio.Future[None]] = []
        self.stopped_by_infrastructure = False

    def add_workload(self, workload: common_pb2.Workload) -> bool:
        if workload.run_id != self.start.run_id:
            return False
        self.workloads.append(workload)
        return True

    def kill(self, by_scheduler: bool = True, reason: str = "") -> None:
        self.kills.append((by_scheduler, reason))
        self.finish.set()

    async def run(self, after=()) -> None:
        self.after = list(after)
        await self.finish.wait()


def make_agent() -> tuple[Agent, dict[tuple[int, int], FakeRun]]:
    made: dict[tuple[int, int], FakeRun] = {}

    def factory(start: agent_pb2.StartTrial) -> FakeRun:
        made[(start.trial_id, start.run_id)] = FakeRun(start)
        return made[(start.trial_id, start.run_id)]

    slots = [common_pb2.Slot(id="cpu0", type="cpu")]
    return Agent("a1", slots, "host", "10.0.0.1", "pool", factory), made


def start_msg(trial_id: int, run_id: int) -> agent_pb2.ConnectResponse:
    return agent_pb2.ConnectResponse(start_trial=agent_pb2.StartTrial(trial_id=trial_id, run_id=run_id))


def test_agent_routes_workloads_and_kills_to_the_right_run() -> None:
    async def scenario() -> None:
        agent, made = make_agent()
        agent.handle(start_msg(1, 1))
        agent.handle(start_msg(2, 1))
        agent.handle(start_msg(1, 1))  # a repeated start is ignored
        assert sorted(made) == [(1, 1), (2, 1)]
        agent.handle(agent_pb2.ConnectResponse(run_workload=agent_pb2.RunWorkload(workload=wl(1, 1))))
        agent.handle(agent_pb2.ConnectResponse(run_workload=agent_pb2.RunWorkload(workload=wl(1, 7))))
        agent.handle(agent_pb2.ConnectResponse(run_workload=agent_pb2.RunWorkload(workload=wl(9, 1))))
        assert [w.run_id for w in made[(1, 1)].workloads] == [1] and made[(2, 1)].workloads == []

        reg = agent.register_message().register
        assert [(t.trial_id, t.run_id) for t in reg.running_trials] == [(1, 1), (2, 1)]
        assert (reg.agent_id, reg.address, reg.resource_pool, list(reg.environments)) == (
            "a1",
            "10.0.0.1",
            "pool",
            ["default"],
        )

        agent.handle(agent_pb2.ConnectResponse(kill_trial=agent_pb2.KillTrial(trial_id=2, run_id=1)))
        assert made[(2, 1)].kills == [(True, "")]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert sorted(agent.runs) == [(1, 1)]  # a finished run is forgotten

        agent.handle(start_msg(1, 2))  # a newer run of trial 1 replaces the old one
        assert made[(1, 1)].kills == [(True, "replaced by run 2")]
        await agent.shutdown("stopping")
        assert made[(1, 2)].kills == [(False, "stopping")]
        assert agent.runs == {}
        agent.handle(start_msg(3, 1))
        assert (3, 1) not in made  # nothing new starts while shutting down

    asyncio.run(scenario())


def test_a_handoff_run_is_given_the_runs_here_whose_slots_it_takes_over() -> None:
    async def scenario() -> None:
        agent, made = make_agent()
        agent.handle(start_msg(1, 1))
        handoff = start_msg(2, 1)
        handoff.start_trial.after.extend(
            [agent_pb2.RunRef(trial_id=1, run_id=1), agent_pb2.RunRef(trial_id=9)]
        )
        agent.handle(handoff)
        await asyncio.sleep(0)
        assert made[(2, 1)].after == [agent._tasks[(1, 1)]]  # run 9 is not here: nothing to wait for
        made[(2, 1)].waiting = True
        reg = agent.register_message().register
        assert reg.accepts_handoffs
        assert [(t.trial_id, t.waiting) for t in reg.running_trials] == [(1, False), (2, True)]
        await agent.shutdown("stopping")

    asyncio.run(scenario())


def test_outbox_keeps_order_and_resends_what_was_not_popped() -> None:
    async def scenario() -> None:
        box = Outbox()
        assert await box.peek(timeout=0.01) is None
        box.put(exited(1))
        box.put(exited(2))
        assert (await box.peek()).trial_exited.trial_id == 1
        assert (await box.peek()).trial_exited.trial_id == 1  # not popped: a failed write retries it
        box.pop()
        assert (await box.peek()).trial_exited.trial_id == 2
        assert not await box.drained(0.01)
        box.pop()
        assert await box.drained(0.01)

        waiter = asyncio.ensure_future(box.peek(timeout=5))
        await asyncio.sleep(0)
        box.put(exited(3))
        assert (await waiter).trial_exited.trial_id == 3

    asyncio.run(scenario())


def test_outbox_drops_oldest_logs_but_never_results_when_full() -> None:
    async def scenario() -> None:
        box = Outbox(max_messages=3)
        for m in [exited(1), logs(1), logs(2), exited(2), logs(3)]:
            box.put(m)
        kept = []
        while len(box):
            kept.append((await box.peek()).WhichOneof("message"))
            box.pop()
        assert kept == ["trial_exited", "trial_exited", "trial_logs"]
        assert box.dropped_log_batches == 2

    asyncio.run(scenario())


def test_lines_are_split_decoded_and_capped() -> None:
    async def scenario() -> list[str]:
        reader = asyncio.StreamReader()
        reader.feed_data(b"first\r\nsec")
        reader.feed_data(b"ond\n\xff bad utf8\n" + b"x" * (MAX_LINE_BYTES + 5) + b"\nlast, unterminated")
        reader.feed_eof()
        return [line async for line in iter_lines(reader)]

    lines = asyncio.run(scenario())
    assert lines[:3] == ["first", "second", "\ufffd bad utf8"]
    assert [len(x) for x in lines[3:5]] == [MAX_LINE_BYTES, 5]
    assert lines[5] == "last, unterminated"


def test_an_operator_sets_the_log_line_limit_with_max_log_line_bytes(tmp_path: Path) -> None:
    async def scenario() -> list[str]:
        reader = asyncio.StreamReader()
        reader.feed_data(b"y" * 25 + b"\nshort\n")
        reader.feed_eof()
        return [line async for line in iter_lines(reader, 10)]

    assert [len(line) for line in asyncio.run(scenario())] == [10, 10, 5, 5]
    cfg = parse_args(["--max-log-line-bytes", "1048576", "--work-dir", str(tmp_path)], environ={})
    assert cfg.max_log_line_bytes == 1048576


def test_log_relay_batches_lines_and_writes_trial_log(tmp_path: Path) -> None:
    sent: list[agent_pb2.ConnectRequest] = []

    async def scenario() -> None:
        relay = LogRelay(4, 2, sent.append, tmp_path / "t" / "trial.log", flush_seconds=0.05, flush_lines=3)
        for i in range(4):
            relay.add("stdout", f"line {i}")
        assert [len(m.trial_logs.lines) for m in sent] == [3]  # full batch goes at once
        await asyncio.sleep(0.2)
        assert [len(m.trial_logs.lines) for m in sent] == [3, 1]  # the rest after the flush interval
        relay.add("stderr", "oops")
        relay.close()

    asyncio.run(scenario())
    last = sent[-1].trial_logs
    assert (last.trial_id, last.run_id) == (4, 2)
    assert (last.lines[0].source, last.lines[0].message, last.lines[0].trial_id) == ("stderr", "oops", 4)
    assert last.lines[0].timestamp.endswith("Z")
    text = (tmp_path / "t" / "trial.log").read_text().splitlines()
    assert text[0].endswith(" [stdout] line 0") and text[-1].endswith(" [stderr] oops")


class FakeContext:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise RuntimeError(f"{code.name}: {details}")


def test_harness_service_hands_out_workloads_and_relays_results() -> None:
    results: list[common_pb2.WorkloadResult] = []

    async def scenario() -> None:
        start = agent_pb2.StartTrial(trial_id=5, run_id=3, experiment_id=1)
        svc = HarnessServicer(start, results.append)
        svc.model_definition_dir = "/w/trials/5-3/model"
        info = await svc.GetTrialInfo(harness_pb2.GetTrialInfoRequest(), FakeContext())
        assert info.trial == start and info.model_definition_dir == "/w/trials/5-3/model"

        pending = asyncio.ensure_future(svc.NextWorkload(harness_pb2.NextWorkloadRequest(), FakeContext()))
        await asyncio.sleep(0.01)
        assert not pending.done()  # blocks until a workload is queued
        assert not svc.add_workload(wl(5, 2))  # an older run's workload is refused
        assert svc.add_workload(wl(5, 3, step=4))
        assert (await pending).workload.step_id == 4

        ok = common_pb2.WorkloadResult(workload=wl(5, 3), num_batches=10)
        await svc.CompleteWorkload(harness_pb2.CompleteWorkloadRequest(result=ok), FakeContext())
        assert results == [ok]
        stale = common_pb2.WorkloadResult(workload=wl(5, 1))
        with pytest.raises(RuntimeError, match="INVALID_ARGUMENT: result.workload is for trial 5 run 1"):
            await svc.CompleteWorkload(harness_pb2.CompleteWorkloadRequest(result=stale), FakeContext())
        assert results == [ok]

    asyncio.run(scenario())


def test_a_reported_failure_goes_on_with_whether_the_run_had_begun_training() -> None:
    async def scenario() -> None:
        svc = HarnessServicer(agent_pb2.StartTrial(trial_id=5, run_id=3), lambda result: None)
        assert svc.failure_report() is None  # nothing reported: the exit carries no signature
        build = agent_pb2.FailureSignature(exception_type="builtins.ValueError", location="__init__.py:6")
        await svc.ReportFailure(harness_pb2.ReportFailureRequest(failure=build), FakeContext())
        other = agent_pb2.FailureSignature(exception_type="builtins.KeyError", location="__init__.py:9")
        await svc.ReportFailure(harness_pb2.ReportFailureRequest(failure=other), FakeContext())
        report = svc.failure_report()
        assert report is not None and report.exception_type == "builtins.ValueError" and not report.trained

        svc.add_workload(wl(5, 3))
        await svc.NextWorkload(harness_pb2.NextWorkloadRequest(), FakeContext())  # a RUN_STEP
        report = svc.failure_report()
        assert report is not None and report.trained

    asyncio.run(scenario())


def test_the_harness_measured_epoch_goes_on_to_the_scheduler() -> None:
    reported: list[int] = []

    async def scenario() -> None:
        svc = HarnessServicer(
            agent_pb2.StartTrial(trial_id=5, run_id=3), lambda result: None, reported.append
        )
        await svc.ReportEpochLength(harness_pb2.ReportEpochLengthRequest(batches=32), FakeContext())
        with pytest.raises(RuntimeError, match="INVALID_ARGUMENT: an epoch of 0 batches"):
            await svc.ReportEpochLength(harness_pb2.ReportEpochLengthRequest(batches=0), FakeContext())

    asyncio.run(scenario())
    assert reported == [32]
