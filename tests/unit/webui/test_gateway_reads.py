"""The Gateway's shared reads: only the same user's identical read is shared, each caller gets its own
message, a refusal reaches every caller, and a write ends the sharing of reads begun before it."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import Gateway, GatewayError
from tests.unit.webui.test_single_flight import WAIT, wait_until


class _NotFound(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.NOT_FOUND

    def details(self) -> str:
        return "experiment 9 not found"


class HeldScheduler:
    """GetExperiment waits until released; PatchExperiment (a write) answers at once."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.release = threading.Event()
        self.notes = "before"

    def GetExperiment(self, request: Any, **_: Any) -> scheduler_pb2.GetExperimentResponse:
        self.calls["GetExperiment"] += 1
        notes = self.notes
        assert self.release.wait(WAIT)
        if request.experiment_id == 9:
            raise _NotFound()
        return scheduler_pb2.GetExperimentResponse(experiment=scheduler_pb2.Experiment(id=1, notes=notes))

    def PatchExperiment(self, request: Any, **_: Any) -> scheduler_pb2.PatchExperimentResponse:
        self.calls["PatchExperiment"] += 1
        self.notes = request.notes
        return scheduler_pb2.PatchExperimentResponse()


@pytest.fixture
def held() -> tuple[Gateway, HeldScheduler]:
    gateway = Gateway("127.0.0.1:1")  # never dialled
    scheduler = HeldScheduler()
    gateway.scheduler = scheduler  # type: ignore[assignment]
    return gateway, scheduler


def read(gateway: Gateway, token: str, exp_id: int = 1) -> Any:
    return gateway.call(token, "GetExperiment", scheduler_pb2.GetExperimentRequest(experiment_id=exp_id))


def callers(gateway: Gateway, n: int) -> None:
    wait_until(lambda: sum(gateway.reads.in_flight().values()) >= n, f"{n} callers")


def test_one_users_identical_reads_share_a_call_and_each_gets_its_own_message(
    held: tuple[Gateway, HeldScheduler],
) -> None:
    gateway, scheduler = held
    with ThreadPoolExecutor(2) as pool:
        answers = [pool.submit(read, gateway, "tok-ann") for _ in range(2)]
        callers(gateway, 2)
        scheduler.release.set()
        first, second = (a.result(WAIT) for a in answers)
    assert scheduler.calls["GetExperiment"] == 1
    first.experiment.notes = "changed by one request"  # as api.trial edits its answer
    assert second.experiment.notes == "before"


def test_two_users_never_share_a_read(held: tuple[Gateway, HeldScheduler]) -> None:
    """What a user may see is the scheduler's answer to that user's own token."""
    gateway, scheduler = held
    with ThreadPoolExecutor(2) as pool:
        answers = [pool.submit(read, gateway, token) for token in ("tok-ann", "tok-bob")]
        callers(gateway, 2)
        scheduler.release.set()
        [a.result(WAIT) for a in answers]
    assert scheduler.calls["GetExperiment"] == 2


def test_a_refusal_reaches_every_caller_sharing_the_read(held: tuple[Gateway, HeldScheduler]) -> None:
    gateway, scheduler = held
    with ThreadPoolExecutor(3) as pool:
        answers = [pool.submit(read, gateway, "tok-ann", 9) for _ in range(3)]
        callers(gateway, 3)
        scheduler.release.set()
        for answer in answers:
            with pytest.raises(GatewayError, match="experiment 9 not found") as refused:
                answer.result(WAIT)
            assert refused.value.status == 404
    assert scheduler.calls["GetExperiment"] == 1


def test_a_read_after_a_write_is_not_given_a_read_begun_before_it(
    held: tuple[Gateway, HeldScheduler],
) -> None:
    """The page's poll was reading when the user saved notes; the page's read after saving shows them."""
    gateway, scheduler = held
    with ThreadPoolExecutor(2) as pool:
        poll: Future[Any] = pool.submit(read, gateway, "tok-ann")
        callers(gateway, 1)
        gateway.call(
            "tok-ann", "PatchExperiment", scheduler_pb2.PatchExperimentRequest(experiment_id=1, notes="after")
        )
        after = pool.submit(read, gateway, "tok-ann")
        wait_until(lambda: scheduler.calls["GetExperiment"] == 2, "a new read")
        scheduler.release.set()
        assert poll.result(WAIT).experiment.notes == "before"
        assert after.result(WAIT).experiment.notes == "after"
