"""Concurrent identical calls share one (pedl_webui.single_flight): results, errors, cancellation."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from starlette.concurrency import run_in_threadpool

from pedl_webui.single_flight import SingleFlight

WAIT = 30.0


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


class Held:
    """A call that runs until released, counting how often it was made."""

    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        self.calls = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        self.result, self.error = result, error

    def __call__(self) -> Any:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(WAIT)
        if self.error is not None:
            raise self.error
        return self.result


def joined(flight: SingleFlight[Any], key: str, callers: int) -> Callable[[], bool]:
    return lambda: flight.in_flight().get(key, 0) >= callers


def test_concurrent_callers_of_one_key_share_one_call_and_each_gets_its_own_copy() -> None:
    flight: SingleFlight[list[int]] = SingleFlight(share=list)
    held = Held(result=[1, 2])
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(flight.call, "exp-1", held) for _ in range(4)]
        wait_until(joined(flight, "exp-1", 4), "4 callers on one call")
        held.release.set()
        results = [f.result(WAIT) for f in futures]
    assert held.calls == 1
    assert results == [[1, 2]] * 4
    assert len({id(r) for r in results}) == 4  # one caller changing its list changes no other's


def test_other_keys_make_their_own_calls_and_nothing_is_kept_after_the_call() -> None:
    flight: SingleFlight[str] = SingleFlight()
    counts = {"a": 0, "b": 0}

    def make(key: str) -> Callable[[], str]:
        def fn() -> str:
            counts[key] += 1
            return f"{key}{counts[key]}"

        return fn

    assert [flight.call("a", make("a")), flight.call("b", make("b"))] == ["a1", "b1"]
    assert flight.call("a", make("a")) == "a2"  # a later caller gets a new answer, not the old one
    assert flight.in_flight() == {}


def test_an_error_reaches_every_waiter_and_the_next_call_is_made_afresh() -> None:
    flight: SingleFlight[str] = SingleFlight()
    held = Held(error=LookupError("experiment 7 not found"))
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(flight.call, "exp-7", held) for _ in range(3)]
        wait_until(joined(flight, "exp-7", 3), "3 callers on one call")
        held.release.set()
        for future in futures:
            with pytest.raises(LookupError, match="experiment 7 not found"):
                future.result(WAIT)
    assert held.calls == 1
    assert flight.call("exp-7", lambda: "found") == "found"


def test_forget_makes_later_callers_start_a_new_call() -> None:
    flight: SingleFlight[str] = SingleFlight()
    before = Held(result="before the write")
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(flight.call, "exp-1", before)
        assert before.entered.wait(WAIT)
        flight.forget()  # a write went through meanwhile
        assert flight.call("exp-1", lambda: "after the write") == "after the write"
        before.release.set()
        assert first.result(WAIT) == "before the write"
    assert flight.in_flight() == {}


@pytest.mark.parametrize("cancelled", ["first caller", "waiter"])
def test_a_cancelled_caller_leaves_the_call_and_its_result_to_the_others(cancelled: str) -> None:
    """As the web UI's handlers wait (on the server's thread pool, from the event loop): the request
    that is cancelled, whether it started the call or joined it, takes nothing from the other."""
    flight: SingleFlight[str] = SingleFlight()
    held = Held(result="experiment 1")

    async def scenario() -> tuple[BaseException | str, BaseException | str]:
        first = asyncio.create_task(run_in_threadpool(flight.call, "exp-1", held))
        await asyncio.to_thread(held.entered.wait, WAIT)
        second = asyncio.create_task(run_in_threadpool(flight.call, "exp-1", held))
        await asyncio.to_thread(wait_until, joined(flight, "exp-1", 2), "the second caller")
        (first if cancelled == "first caller" else second).cancel()
        held.release.set()
        outcome = await asyncio.gather(first, second, return_exceptions=True)
        return outcome[0], outcome[1]

    first, second = asyncio.run(scenario())
    kept, dropped = (second, first) if cancelled == "first caller" else (first, second)
    assert kept == "experiment 1"
    assert isinstance(dropped, asyncio.CancelledError)
    assert held.calls == 1


def test_no_caller_can_cancel_the_shared_call() -> None:
    flight: SingleFlight[str] = SingleFlight()
    held = Held(result="done")
    with ThreadPoolExecutor(2) as pool:
        leader = pool.submit(flight.call, "k", held)
        assert held.entered.wait(WAIT)
        waiter = pool.submit(flight.call, "k", held)
        wait_until(joined(flight, "k", 2), "the waiter")
        shared = flight._flights["k"].future  # what a waiter waits on
        assert not shared.cancel()
        held.release.set()
        assert (leader.result(WAIT), waiter.result(WAIT)) == ("done", "done")


def test_a_failing_copy_reaches_the_waiters_as_an_error_not_a_hang() -> None:
    def share(value: str) -> str:
        raise MemoryError("no room for a copy")

    flight: SingleFlight[str] = SingleFlight(share=share)
    held = Held(result="big answer")
    with ThreadPoolExecutor(2) as pool:
        leader = pool.submit(flight.call, "k", held)
        assert held.entered.wait(WAIT)
        waiter = pool.submit(flight.call, "k", held)
        wait_until(joined(flight, "k", 2), "the waiter")
        held.release.set()
        for answer in (leader, waiter):
            with pytest.raises(MemoryError, match="no room"):
                answer.result(WAIT)
