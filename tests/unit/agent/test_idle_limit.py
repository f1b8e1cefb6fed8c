"""`pedl-agent --trial-idle-timeout`: a run holding a workload with no result for that long is
killed with one line; a run waiting for work (the scheduler's doing) or reporting in time is not.

Before: a trial that never reported kept its slot for ever."""

from __future__ import annotations

import asyncio

from pedl_agent.load_limit import watch_idle


def test_a_workload_without_a_result_past_the_limit_kills_the_run_with_one_line() -> None:
    now = [0.0]
    reasons: list[str] = []

    async def scenario() -> None:
        watcher = asyncio.ensure_future(watch_idle(lambda: 0.0, 0.2, reasons.append, clock=lambda: now[0]))
        await asyncio.sleep(0.15)
        assert reasons == []  # 0.1 s in, below the limit
        now[0] = 0.25
        await asyncio.wait_for(watcher, 5)

    asyncio.run(scenario())
    assert len(reasons) == 1 and "\n" not in reasons[0]
    assert "reported nothing for 0.2 s" in reasons[0] and "--trial-idle-timeout" in reasons[0]


def test_waiting_for_work_or_reporting_in_time_is_not_idle() -> None:
    now = [0.0]
    busy: list[float | None] = [None]
    reasons: list[str] = []

    async def scenario() -> None:
        watcher = asyncio.ensure_future(
            watch_idle(lambda: busy[0], 0.2, reasons.append, clock=lambda: now[0])
        )
        for step in range(10):  # a result every 0.1 s of the fake clock; idle stretches in between
            now[0] += 0.1
            busy[0] = now[0] if step % 2 else None
            await asyncio.sleep(0.06)
        watcher.cancel()

    asyncio.run(scenario())
    assert reasons == []
