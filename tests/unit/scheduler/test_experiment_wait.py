"""WaitExperiment's wait: it answers when the experiment ends (woken by the scheduler's change
notice), not on a poll, and never later than its timeout."""

from __future__ import annotations

import asyncio

import pytest

from pedl_scheduler import experiment_wait
from pedl_scheduler.experiment_wait import wait_for_end


def test_an_ended_experiment_is_answered_at_once() -> None:
    async def run() -> str | None:
        return await wait_for_end(lambda: "COMPLETED", asyncio.Condition(), 30.0)

    assert asyncio.run(run()) == "COMPLETED"


def test_the_wait_ends_on_the_change_notice_that_ends_the_experiment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiment_wait, "RECHECK_SECONDS", 60.0)  # only the notice can end it in time

    async def run() -> tuple[str | None, bool]:
        changed = asyncio.Condition()
        states = ["ACTIVE"]
        waiter = asyncio.create_task(wait_for_end(lambda: states[-1], changed, 30.0))
        await asyncio.sleep(0.05)
        states.append("CANCELED")
        async with changed:
            changed.notify_all()
        state = await asyncio.wait_for(waiter, timeout=20.0)
        return state, waiter.done()

    assert asyncio.run(run()) == ("CANCELED", True)


def test_a_running_experiment_is_answered_after_the_timeout_and_an_unknown_one_at_once() -> None:
    async def run() -> tuple[str | None, str | None]:
        running = await wait_for_end(lambda: "ACTIVE", asyncio.Condition(), 0.05)
        unknown = await wait_for_end(lambda: None, asyncio.Condition(), 30.0)
        return running, unknown

    assert asyncio.run(run()) == ("ACTIVE", None)
