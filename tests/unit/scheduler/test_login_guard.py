"""Login attempt limits and the hashing pool: growing delays per user and per client (address plus
the identity it sends), nothing that tells a known username from an unknown one, and a bounded
number of hashes in flight."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pedl_scheduler.login_guard import AttemptLimits, Busy, Client, HashPool, Limits, Wait, peer_address


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def seconds(wait: Wait | None) -> float:
    return 0 if wait is None else wait.seconds


def test_failures_past_the_free_ones_wait_twice_as_long_each_time() -> None:
    clock = Clock()
    limits = AttemptLimits(Limits(free_per_user=3, free_per_client=100, base_delay=1, max_delay=8), clock)
    a, b = Client("10.0.0.1", "cli-a"), Client("10.9.9.9", "cli-b")
    for _ in range(2):
        limits.failed("alice", a)
        assert limits.wait("alice", a) is None
    waits = []
    for _ in range(5):
        limits.failed("alice", a)
        waits.append(seconds(limits.wait("alice", a)))
        clock.now += waits[-1]
    assert waits == [1, 2, 4, 8, 8]  # from the third failure on: doubling, capped
    # The limit is the user's, from any client; another user is not held up.
    assert limits.wait("ALICE", b) is None  # waited out above
    limits.failed("alice", b)
    assert limits.wait("alice", b) == Wait(8, "user")
    assert limits.wait("bob", b) is None
    limits.succeeded("alice", b)
    assert limits.wait("alice", a) is None


def test_a_client_spraying_usernames_is_slowed_down_and_only_that_client() -> None:
    clock = Clock()
    limits = AttemptLimits(Limits(free_per_user=100, free_per_client=4, base_delay=2, max_delay=60), clock)
    guesser = Client("127.0.0.1", "trial-7")
    for i in range(4):
        limits.failed(f"user{i}", guesser)
    assert limits.wait("someone-new", guesser) == Wait(2, "client")
    # The CLI and the web UI on the same address (a local cluster, a NAT) are not held up.
    assert limits.wait("someone-new", Client("127.0.0.1", "cli-1234")) is None
    assert limits.wait("someone-new", Client("127.0.0.1", "webui-10.1.2.3")) is None
    assert limits.wait("someone-new", Client("10.0.0.3")) is None


def test_the_refusal_says_whose_limit_it_is() -> None:
    client = Client("127.0.0.1", "cli-ab12")
    assert Wait(1.2, "user").message("alice", client) == (
        "too many failed logins for user 'alice': try again in 2 s"
    )
    assert Wait(30, "client").message("alice", client) == (
        "too many failed logins for this client, 127.0.0.1 (cli-ab12): try again in 30 s"
    )


def test_unknown_and_known_users_are_limited_alike_and_failures_are_forgotten() -> None:
    clock = Clock()
    limits = AttemptLimits(Limits(free_per_user=2, free_per_client=100, base_delay=1, forget_after=60), clock)
    for name in ("alice", "no-such-user"):
        limits.failed(name, Client("a"))
        limits.failed(name, Client("b"))
    assert (
        seconds(limits.wait("alice", Client("c"))) == seconds(limits.wait("no-such-user", Client("c"))) == 1
    )
    clock.now += 61
    assert limits.wait("alice", Client("c")) is None


def test_tracking_stays_bounded_under_a_spray_of_names() -> None:
    limits = AttemptLimits(Limits(max_tracked=100), Clock())
    for i in range(1000):
        limits.failed(f"user{i}", Client(f"10.0.{i // 250}.{i % 250}"))
    assert len(limits._failures) <= 100


def test_peer_addresses() -> None:
    assert peer_address("ipv4:127.0.0.1:5555") == "127.0.0.1"
    assert peer_address("ipv6:[::1]:5555") == "::1"
    assert peer_address("unix:/tmp/s") == "unix:/tmp/s"


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


def test_one_client_cannot_fill_the_pool_that_other_clients_need() -> None:
    release = threading.Event()

    def slow() -> int:
        release.wait(10)
        return 1

    async def main() -> None:
        pool = HashPool(workers=1, queue=8, per_client=2)
        storm, other = Client("127.0.0.1", "script"), Client("127.0.0.1", "cli-carol")
        held = [asyncio.ensure_future(pool.run(slow, client=storm)) for _ in range(2)]
        await asyncio.sleep(0.05)
        with pytest.raises(Busy, match=r"logins of this client, 127.0.0.1 \(script\), are being checked"):
            await pool.run(slow, client=storm)
        carol = asyncio.ensure_future(pool.run(slow, client=other))  # still room for her
        await asyncio.sleep(0.05)
        release.set()
        assert sum([await h for h in held]) + await carol == 3
        assert await pool.run(lambda: 3, client=storm) == 3  # the client's share comes back
        pool.close()

    asyncio.run(main())
