"""Login attempt limits and the hashing pool: growing delays per user and per address, nothing
that tells a known username from an unknown one, and a bounded number of hashes in flight."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pedl_scheduler.login_guard import AttemptLimits, Busy, HashPool, Limits, peer_address, retry_message


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_failures_past_the_free_ones_wait_twice_as_long_each_time() -> None:
    clock = Clock()
    limits = AttemptLimits(Limits(free_per_user=3, free_per_address=100, base_delay=1, max_delay=8), clock)
    for _ in range(2):
        limits.failed("alice", "10.0.0.1")
        assert limits.wait("alice", "10.0.0.1") == 0
    waits = []
    for _ in range(5):
        limits.failed("alice", "10.0.0.1")
        waits.append(limits.wait("alice", "10.0.0.1"))
        clock.now += waits[-1]
    assert waits == [1, 2, 4, 8, 8]  # from the third failure on: doubling, capped
    # The limit is the user's, from any address; another user is not held up.
    assert limits.wait("ALICE", "10.9.9.9") == 0  # waited out above
    limits.failed("alice", "10.9.9.9")
    assert limits.wait("alice", "10.9.9.9") == 8
    assert limits.wait("bob", "10.9.9.9") == 0
    limits.succeeded("alice", "10.9.9.9")
    assert limits.wait("alice", "10.0.0.1") == 0


def test_an_address_spraying_usernames_is_slowed_down_too() -> None:
    clock = Clock()
    limits = AttemptLimits(Limits(free_per_user=100, free_per_address=4, base_delay=2, max_delay=60), clock)
    for i in range(4):
        limits.failed(f"user{i}", "10.0.0.2")
    assert limits.wait("someone-new", "10.0.0.2") == 2
    assert limits.wait("someone-new", "10.0.0.3") == 0


def test_unknown_and_known_users_are_limited_alike_and_failures_are_forgotten() -> None:
    clock = Clock()
    limits = AttemptLimits(
        Limits(free_per_user=2, free_per_address=100, base_delay=1, forget_after=60), clock
    )
    for name in ("alice", "no-such-user"):
        limits.failed(name, "a")
        limits.failed(name, "b")
    assert limits.wait("alice", "c") == limits.wait("no-such-user", "c") == 1
    clock.now += 61
    assert limits.wait("alice", "c") == 0


def test_tracking_stays_bounded_under_a_spray_of_names() -> None:
    limits = AttemptLimits(Limits(max_tracked=100), Clock())
    for i in range(1000):
        limits.failed(f"user{i}", f"10.0.{i // 250}.{i % 250}")
    assert len(limits._failures) <= 100


def test_peer_addresses_and_the_message() -> None:
    assert peer_address("ipv4:127.0.0.1:5555") == "127.0.0.1"
    assert peer_address("ipv6:[::1]:5555") == "::1"
    assert peer_address("unix:/tmp/s") == "unix:/tmp/s"
    assert retry_message(1.2) == "too many failed logins for this user or from this address: try again in 2 s"


def test_the_pool_hashes_off_the_loop_and_refuses_past_its_capacity() -> None:
    release = threading.Event()
    loop_threads: set[int] = set()

    def slow() -> int:
        loop_threads.add(threading.get_ident())
        release.wait(10)
        return 1

    async def main() -> None:
        pool = HashPool(workers=1, queue=1)
        first = asyncio.ensure_future(pool.run(slow))
        second = asyncio.ensure_future(pool.run(slow))
        await asyncio.sleep(0.05)
        with pytest.raises(Busy, match="logins are being checked"):
            await pool.run(slow)
        release.set()
        assert await first + await second == 2
        assert threading.get_ident() not in loop_threads
        assert await pool.run(lambda: 3) == 3  # capacity comes back
        pool.close()

    asyncio.run(main())
