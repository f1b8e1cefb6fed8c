"""Concurrent identical calls share one: the first caller of a key makes the call, callers of the
same key that arrive while it runs wait for its result (or its error) instead of making their own.

The experiment page asks for its summary and its importance at the same moment, and both ask the
scheduler for the same experiment (0.3-0.5 s under load at 1,000 trials); shared, that is one call.
Nothing is kept once the call returns: a caller that arrives afterwards makes a new call, so no
answer is older than the call it waited on. Threads only (the web UI's handlers run on its pool).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Flight(Generic[T]):
    future: Future[T] = field(default_factory=Future)
    callers: int = 1


class SingleFlight(Generic[T]):
    """`call(key, fn)`: fn's result, from one run of fn however many threads ask for `key` at once.

    `share` gives each waiting caller its own value (a copy: a caller may change what it got); the
    first caller gets fn's own result. A waiter never cancels the call: the call belongs to no one
    caller, and a caller that stops waiting (its request cancelled) leaves the others their result.
    """

    def __init__(self, share: Callable[[T], T] = lambda value: value) -> None:
        self._share = share
        self._lock = threading.Lock()
        self._flights: dict[Hashable, _Flight[T]] = {}

    def call(self, key: Hashable, fn: Callable[[], T]) -> T:
        with self._lock:
            flight = self._flights.get(key)
            leads = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
                # Running: Future.cancel() now refuses, so no waiter can cancel it for the others.
                flight.future.set_running_or_notify_cancel()
            else:
                flight.callers += 1
        if leads:
            return self._lead(key, flight, fn)
        return self._share(flight.future.result())

    def _lead(self, key: Hashable, flight: _Flight[T], fn: Callable[[], T]) -> T:
        try:
            result = fn()
            # Waiters get a copy made before this caller may change its own (none: nothing to copy).
            shared = self._share(result) if self._land(key, flight) else result
        except BaseException as e:  # every waiter gets the error (a waiter is never left hanging)
            self._land(key, flight)
            flight.future.set_exception(e)
            raise
        flight.future.set_result(shared)
        return result

    def _land(self, key: Hashable, flight: _Flight[T]) -> bool:
        """Ends the flight (a later caller makes a new call); whether anyone joined it."""
        with self._lock:
            if self._flights.get(key) is flight:
                del self._flights[key]
            return flight.callers > 1

    def forget(self) -> None:
        """Callers from now on make new calls (after a write: no read begun before it is shared)."""
        with self._lock:
            self._flights.clear()

    def in_flight(self) -> dict[Hashable, int]:
        """Each running call's key and how many callers share it."""
        with self._lock:
            return {key: flight.callers for key, flight in self._flights.items()}
