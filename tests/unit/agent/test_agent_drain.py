"""`pedl-agent` on SIGUSR2 (a Slurm pilot near its walltime): it asks the scheduler to checkpoint and
stop its trials, asks again while any remain, and exits once none does."""

from __future__ import annotations

import asyncio

from pedl_agent import drain
from pedl_agent.outbox import Outbox


def test_a_draining_agent_asks_for_its_trials_and_exits_once_they_are_gone(monkeypatch) -> None:
    monkeypatch.setattr(drain, "RESEND_SECONDS", 0.05)
    monkeypatch.setattr(drain, "POLL_SECONDS", 0.01)
    runs: dict[tuple[int, int], object] = {(1, 1): object()}
    outbox = Outbox()
    asked, stop = asyncio.Event(), asyncio.Event()

    async def scenario() -> None:
        task = asyncio.ensure_future(drain.drain_when_asked(runs, outbox, asked, stop, "job 7 nears its end"))
        await asyncio.sleep(0.05)
        assert len(outbox) == 0 and not stop.is_set()  # nothing before the signal
        asked.set()
        # Asked again while the trial runs: wait for the second ask (a stalled loop on a loaded
        # machine can push the resend past any fixed sleep).
        deadline = asyncio.get_running_loop().time() + 30
        while len(outbox) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert not stop.is_set()  # a trial still runs: the agent stays
        sent = [outbox.pop() for _ in range(len(outbox))]
        assert len(sent) >= 2  # asked again while the trial runs
        assert all(m.WhichOneof("message") == "draining" for m in sent)
        assert sent[0].draining.reason == "job 7 nears its end"
        runs.clear()  # the trial checkpointed and exited
        await asyncio.wait_for(task, 5)
        assert stop.is_set()

    asyncio.run(scenario())


def test_an_idle_agent_leaves_at_once_when_asked_to_drain() -> None:
    outbox = Outbox()

    async def scenario() -> None:
        asked, stop = asyncio.Event(), asyncio.Event()
        asked.set()
        await asyncio.wait_for(drain.drain_when_asked({}, outbox, asked, stop, "r"), 5)
        assert stop.is_set() and len(outbox) == 0

    asyncio.run(scenario())
