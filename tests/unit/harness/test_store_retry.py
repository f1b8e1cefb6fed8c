"""A harness's store calls wait out an outage within their budget, then end the run with the exit code
the scheduler reads as an infrastructure failure."""

from __future__ import annotations

import grpc
import pytest

from pedl.checkpoints.errors import CheckpointError, CheckpointNotFound
from pedl.harness.main import _exit_code
from pedl.harness.store_retry import (
    STORE_UNAVAILABLE_EXIT_CODE,
    StoreUnavailable,
    budget_from_env,
    with_store_retries,
)

DOWN = CheckpointError(
    "checkpoint store at 127.0.0.1:9 unreachable: Connection refused", grpc.StatusCode.UNAVAILABLE
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def flaky(failures: int, error: Exception = DOWN):  # type: ignore[no-untyped-def]
    calls = {"n": 0}

    def call() -> str:
        calls["n"] += 1
        if calls["n"] <= failures:
            raise error
        return "restored"

    return call, calls


def test_an_outage_shorter_than_the_budget_is_waited_out() -> None:
    clock, said = Clock(), []
    call, calls = flaky(20)
    got = with_store_retries(call, "restoring checkpoint x", 120, clock.sleep, lambda: clock.now, said.append)
    assert got == "restored" and calls["n"] == 21
    assert max(clock.sleeps) <= 5.0 and clock.now < 120  # capped backoff, within the budget
    assert "restoring checkpoint x: checkpoint store at 127.0.0.1:9 unreachable" in said[0]


def test_an_outage_longer_than_the_budget_ends_as_store_unavailable() -> None:
    clock = Clock()
    call, _ = flaky(10**6)
    with pytest.raises(StoreUnavailable, match=r"restoring checkpoint x: .* unreachable .* over 30 s"):
        with_store_retries(call, "restoring checkpoint x", 30, clock.sleep, lambda: clock.now)
    assert 30 <= clock.now < 31


def test_errors_the_store_answered_are_not_retried() -> None:
    clock = Clock()
    call, calls = flaky(1, CheckpointNotFound("checkpoint x not found", grpc.StatusCode.NOT_FOUND))
    with pytest.raises(CheckpointNotFound):
        with_store_retries(call, "restoring checkpoint x", 120, clock.sleep, lambda: clock.now)
    assert calls["n"] == 1 and clock.sleeps == []


def test_the_exit_code_says_whether_the_store_or_the_trial_failed() -> None:
    try:
        try:
            raise StoreUnavailable("store gone")
        except StoreUnavailable as e:
            raise RuntimeError("while building the trial") from e
    except RuntimeError as wrapped:
        assert _exit_code(wrapped) == STORE_UNAVAILABLE_EXIT_CODE == 75
    assert _exit_code(ValueError("the user's bug")) == 1


def test_the_budget_comes_from_the_agent_or_defaults_to_two_minutes() -> None:
    assert budget_from_env({}) == 120.0
    assert budget_from_env({"PEDL_STORE_RETRY_BUDGET_S": "20"}) == 20.0
    with pytest.raises(ValueError, match="PEDL_STORE_RETRY_BUDGET_S must be a number of seconds"):
        budget_from_env({"PEDL_STORE_RETRY_BUDGET_S": "soon"})


def test_a_core_api_call_that_found_the_store_gone_is_remembered(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A script that then fails fails because of the store: its harness exits as the store's failure."""
    from pedl.harness.core_api_server import CoreApiServer

    def store_checkpoint() -> None:
        raise StoreUnavailable("uploading the checkpoint: store gone")

    server = CoreApiServer(tmp_path / "core.sock", {"store": store_checkpoint, "ok": lambda: 1})
    try:
        assert server.answer("ok", {}) == ("ok", 1) and server.store_unavailable is None
        assert server.answer("store", {}) == ("error", "uploading the checkpoint: store gone")
        assert isinstance(server.store_unavailable, StoreUnavailable)
        assert _exit_code(server.store_unavailable) == STORE_UNAVAILABLE_EXIT_CODE
    finally:
        server.close()
