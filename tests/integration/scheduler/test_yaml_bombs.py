"""A `pedl-scheduler` process refuses YAML bombs in its config at CreateExperiment in one line,
and its memory stays where it was.

Before: a 700-byte alias bomb cost the scheduler 31 s of CPU and took it from 111 MB to 1.4 GB,
which it kept; 10,000-deep nesting answered `UNKNOWN RecursionError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from pedl import _grpc
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from support import processes
from support.models import plain_tar, tiny_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SLACK = 64 * 2**20  # allocator noise, gRPC buffers; the bomb took over a gigabyte


def alias_bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return tiny_config() + "\n".join(lines) + "\n"


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[processes.Service]:
    workdir = tmp_path_factory.mktemp("scheduler")
    port_file = workdir / "scheduler.port"
    args = ["pedl-scheduler", "--port", "0", "--no-auth", "--metrics-port", "-1"]
    args += [
        "--db",
        str(workdir / "pedl.db"),
        "--checkpoint-store",
        "127.0.0.1:1",
        "--port-file",
        str(port_file),
    ]
    service = processes.start("scheduler", args, workdir, port_file)
    try:
        yield service
    finally:
        processes.stop(service.process)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (alias_bomb(9), "aliases expanded"),
        (alias_bomb(11), "aliases expanded"),
        (tiny_config() + "x: " + "[" * 10_000 + "]" * 10_000 + "\n", "nested more than"),
    ],
    ids=["alias-bomb-9", "alias-bomb-11", "10000-deep"],
)
def test_a_yaml_bomb_is_refused_in_one_line_and_memory_returns(
    scheduler: processes.Service, config: str, message: str
) -> None:
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(scheduler.address))
    stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30)  # warmed up
    before = rss(scheduler.process.pid)
    request = scheduler_pb2.CreateExperimentRequest(
        config_yaml=config,
        model_definition=plain_tar({"model_def.py": b"x = 1\n"}),
        model_definition_name="model",
    )
    for _ in range(3):
        with pytest.raises(grpc.RpcError) as refused:
            stub.CreateExperiment(request, timeout=60)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        details = refused.value.details() or ""
        assert message in details and "\n" not in details, details
    after = rss(scheduler.process.pid)
    assert after <= before + SLACK, (before, after)
    assert stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30).experiments == []
