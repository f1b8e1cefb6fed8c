"""The harness's checkpoint store calls ride out an outage within a budget, then say it was the store.

A restore or upload that fails because the store (or the S3 behind it) cannot be reached is no fault
of the trial: it is retried with capped exponential backoff for up to `PEDL_STORE_RETRY_BUDGET_S`
seconds (the agent's `--store-retry-budget`). When the budget runs out the harness exits with
STORE_UNAVAILABLE_EXIT_CODE, which the scheduler reads as an infrastructure failure: the trial waits
and restarts without spending the user's `max_restarts`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

import grpc

from pedl._backoff import backoff_seconds
from pedl.checkpoints.errors import CheckpointError

# EX_TEMPFAIL (sysexits.h): the failure is temporary and outside the program.
STORE_UNAVAILABLE_EXIT_CODE = 75
BUDGET_ENV = "PEDL_STORE_RETRY_BUDGET_S"
# Covers the store's own restart (kill -9, back 30-40 s later) with room to spare.
DEFAULT_BUDGET_S = 120.0
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 5.0
_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}

T = TypeVar("T")


class StoreUnavailable(Exception):
    """The checkpoint store (or its storage) stayed unreachable for the whole retry budget."""


def budget_from_env(environ: dict[str, str] | None = None) -> float:
    text = (os.environ if environ is None else environ).get(BUDGET_ENV, "")
    if not text:
        return DEFAULT_BUDGET_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{BUDGET_ENV} must be a number of seconds, got {text!r}") from None
    if value < 0:
        raise ValueError(f"{BUDGET_ENV} must be >= 0, got {text!r}")
    return value


def unreachable(exc: BaseException) -> bool:
    """Whether the error says the store or its storage could not be reached (worth waiting for)."""
    return isinstance(exc, CheckpointError) and exc.code in _UNREACHABLE


def with_store_retries(
    call: Callable[[], T],
    what: str,
    budget_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    on_retry: Callable[[str], None] | None = None,
) -> T:
    """`call()` until it returns, retrying while the store is unreachable and the budget lasts."""
    deadline = clock() + budget_s
    attempts = 0
    while True:
        attempts += 1
        try:
            return call()
        except CheckpointError as e:
            if not unreachable(e):
                raise
            left = deadline - clock()
            if left <= 0:
                raise StoreUnavailable(
                    f"{what}: {e} (still unreachable after {attempts} attempts over {budget_s:g} s, "
                    f"the harness's store retry budget, {BUDGET_ENV})"
                ) from e
            pause = min(left, backoff_seconds(attempts, FIRST_DELAY_S, MAX_DELAY_S))
            if on_retry is not None:
                on_retry(f"{what}: {e}; retrying in {pause:.1f} s ({left:.0f} s of the retry budget left)")
            sleep(pause)
