"""Logins that cannot stall the scheduler or be guessed quickly.

Password hashing (scrypt at 128 MiB, `users.py`) runs in a small thread pool, never on the event
loop, and at most `workers + queue` logins are in flight: the rest are refused at once. Failed
attempts count per username (known or not, so a refusal tells nothing about which users exist)
and per client (its address plus the identity it sends as `pedl-client` metadata: the CLI, the
web UI on behalf of each browser, and trials send one), never per address alone: the CLI, every
trial and the web UI share 127.0.0.1 on a local cluster, as clients behind a NAT or proxy do, and
one of them guessing must not lock out the others. Past a few free failures each further attempt
must wait a delay that doubles with every failure (capped), and a failure-free window forgets
them; the refusal says whose limit it is (the account's or the client's). A good login clears its
user's and client's counts. A client that changes its identity escapes its client limit but not
the account's, which is what stops guessing. Refusals are answered without hashing, after a short tarpit, so a
storm of wrong logins costs the scheduler little; hashing threads run at a lower priority than
the event loop.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from pedl._backoff import backoff_seconds

T = TypeVar("T")
HASH_THREAD_NICENESS = 10
# A refused login is answered after this long (or its wait, if shorter): a client hammering the
# scheduler then costs it one sleeping coroutine per connection, not a busy loop of refusals.
TARPIT_SECONDS = 1.0


@dataclass(frozen=True)
class Limits:
    free_per_user: int = 5  # failures before the first wait
    free_per_client: int = 20
    base_delay: float = 2.0
    max_delay: float = 300.0
    forget_after: float = 900.0
    max_tracked: int = 100_000


def default_workers() -> int:
    """One hashing thread per four cores (at least one): logins never take the loop's core."""
    return max(1, min(4, (os.cpu_count() or 1) // 4))


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0
    next_allowed: float = 0.0


@dataclass(frozen=True)
class Client:
    """Who is logging in, for limits: the peer address and the identity it sent (may be empty)."""

    address: str
    identity: str = ""

    def describe(self) -> str:
        return f"{self.address} ({self.identity})" if self.identity else self.address


@dataclass(frozen=True)
class Wait:
    """A refusal: how long to wait, and whose limit it is."""

    seconds: float
    whose: str  # "user" or "client"

    def message(self, username: str, client: Client) -> str:
        target = f"user {username!r}" if self.whose == "user" else f"this client, {client.describe()}"
        return f"too many failed logins for {target}: try again in {math.ceil(self.seconds)} s"


class AttemptLimits:
    """Pure bookkeeping with an injectable clock; the servicer asks `wait` before hashing."""

    def __init__(self, limits: Limits = Limits(), clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self._failures: dict[str, _Failures] = {}

    def _keys(self, username: str, client: Client) -> list[tuple[str, str, int]]:
        return [
            ("user", f"user:{username.lower()}", self.limits.free_per_user),
            ("client", f"client:{client.address}|{client.identity}", self.limits.free_per_client),
        ]

    def wait(self, username: str, client: Client) -> Wait | None:
        """How long until this user may be tried again by this client (None: go ahead)."""
        now = self.clock()
        longest: Wait | None = None
        for whose, key, _ in self._keys(username, client):
            f = self._failures.get(key)
            if f is None:
                continue
            if now - f.last > self.limits.forget_after:
                del self._failures[key]
                continue
            if f.next_allowed > now and (longest is None or f.next_allowed - now > longest.seconds):
                longest = Wait(f.next_allowed - now, whose)
        return longest

    def failed(self, username: str, client: Client) -> None:
        now = self.clock()
        if len(self._failures) >= self.limits.max_tracked:
            self._forget_old(now)
        for _, key, free in self._keys(username, client):
            f = self._failures.setdefault(key, _Failures())
            f.count += 1
            f.last = now
            excess = f.count - free + 1  # the free-th failure starts the waits
            if excess > 0:
                delay = backoff_seconds(excess, self.limits.base_delay, self.limits.max_delay, jitter=False)
                f.next_allowed = now + delay

    def succeeded(self, username: str, client: Client) -> None:
        for _, key, _ in self._keys(username, client):
            self._failures.pop(key, None)

    def _forget_old(self, now: float) -> None:
        for key in [k for k, f in self._failures.items() if now - f.last > self.limits.forget_after]:
            del self._failures[key]
        if len(self._failures) >= self.limits.max_tracked:  # under a spray of names: oldest first
            for key in sorted(self._failures, key=lambda k: self._failures[k].last)[
                : len(self._failures) // 2
            ]:
                del self._failures[key]


class Busy(Exception):
    """More logins in flight than the pool takes."""


def _lower_priority() -> None:
    """Hashing threads yield the CPU to the event loop's thread when both want it (Linux: per thread)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), HASH_THREAD_NICENESS)
    except (OSError, AttributeError):
        pass


class HashPool:
    """Runs password hashing off the event loop, `workers` at a time, `queue` more waiting; one
    client (`Client`) has at most `per_client` in flight, so a client storming wrong logins cannot
    fill the pool that other clients' logins need."""

    def __init__(self, workers: int | None = None, queue: int = 16, per_client: int = 2) -> None:
        self.workers = workers or default_workers()
        self._executor = ThreadPoolExecutor(
            self.workers, thread_name_prefix="pedl-login", initializer=_lower_priority
        )
        self._capacity = self.workers + queue
        self._per_client = per_client
        self._in_flight = 0
        self._by_client: dict[Client, int] = {}

    async def run(self, fn: Callable[..., T], *args: object, client: Client | None = None) -> T:
        if self._in_flight >= self._capacity:
            raise Busy(f"{self._in_flight} logins are being checked: try again in a moment")
        mine = self._by_client.get(client, 0) if client is not None else 0
        if client is not None and mine >= self._per_client:
            raise Busy(
                f"{mine} logins of this client, {client.describe()}, are being checked: try again in a moment"
            )
        self._in_flight += 1
        if client is not None:
            self._by_client[client] = mine + 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        finally:
            self._in_flight -= 1
            if client is not None:
                left = self._by_client.pop(client) - 1
                if left:
                    self._by_client[client] = left

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def peer_address(peer: str) -> str:
    """`ipv4:127.0.0.1:5555` -> `127.0.0.1`; `ipv6:[::1]:5555` -> `::1`; a unix socket as is."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return peer
