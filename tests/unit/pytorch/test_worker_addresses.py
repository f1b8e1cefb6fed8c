"""`ProcessGroup.worker_addresses()` across real gloo ranks: never one address twice, even when every
port draw collides; machines that keep colliding fail together with one clear error."""

from __future__ import annotations

import dataclasses
import os
import pickle
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch.multiprocessing as mp

from pedl.harness import distributed
from pedl.harness.distributed import Launch, ProcessGroup, free_ports
from support.processes import on_a_free_port

TIMEOUT_S = 180


class _SameDraw:
    """A random source whose every draw is `port`: each pick proposes the same port first."""

    def __init__(self, port: int) -> None:
        self.port = port

    def randrange(self, low: int, high: int) -> int:
        return self.port


@pytest.fixture
def low_port() -> Iterator[int]:
    """A port below the ephemeral range that nothing listens on (free_ports draws from there)."""
    low = distributed._ephemeral_low()
    if low <= 10000:
        pytest.skip("the ephemeral range starts at 10000 or below: nothing is drawn")
    yield free_ports("127.0.0.1", 1)[0]


def test_every_draw_colliding_still_gives_different_ports(
    low_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(distributed.random, "Random", lambda: _SameDraw(low_port))
    ports = free_ports("127.0.0.1", 4)
    assert len(set(ports)) == 4 and ports[0] == low_port


def _rank(rank: int, launch: Launch, same_draw: int, collide: int, out: Path) -> None:
    """One rank: `same_draw` forces every port draw to one port; `collide` makes each machine pick
    the same single port on its first `collide` tries (two machines reached at one address)."""
    os.environ["PEDL_AGENT_ADDRESS"] = "127.0.0.1"
    if same_draw:
        distributed.random.Random = lambda: _SameDraw(same_draw)  # type: ignore[assignment, misc]
    if collide:
        real, tries = distributed.free_ports, [0]

        def colliding(host: str, count: int) -> list[int]:
            tries[0] += 1
            return [40000 + i for i in range(count)] if tries[0] <= collide else real(host, count)

        distributed.free_ports = colliding  # type: ignore[assignment]
    group = ProcessGroup(dataclasses.replace(launch, rank=rank, local_rank=rank % launch.local_world_size))
    group.start()
    try:
        result: Any = group.worker_addresses()
    except distributed.WorkerAddressClash as e:
        result = f"WorkerAddressClash: {e}"
    (out / f"rank{rank}").write_bytes(pickle.dumps(result))
    group.finish()
    os._exit(0)


def _run(out: Path, world: int, local_world: int, same_draw: int = 0, collide: int = 0) -> list[Any]:
    """The ranks' results, on a new rendezvous port should another process take the picked one."""
    return on_a_free_port(lambda port: _run_on(port, out, world, local_world, same_draw, collide))


def _run_on(port: int, out: Path, world: int, local_world: int, same_draw: int, collide: int) -> list[Any]:
    out.mkdir(parents=True, exist_ok=True)
    launch = Launch(0, 0, world, local_world, "127.0.0.1", port)
    ctx = mp.start_processes(
        _rank, args=(launch, same_draw, collide, out), nprocs=world, join=False, start_method="spawn"
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not ctx.join(timeout=1):
            assert time.monotonic() < deadline, "the ranks did not finish"
    finally:
        for p in ctx.processes:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join()
    return [pickle.loads((out / f"rank{r}").read_bytes()) for r in range(world)]


def test_ranks_of_one_machine_get_different_ports_when_every_draw_collides(
    tmp_path: Path, low_port: int
) -> None:
    results = _run(tmp_path, world=3, local_world=3, same_draw=low_port)
    assert results[0] == results[1] == results[2]
    assert len(set(results[0])) == 3 and all(a.startswith("127.0.0.1:") for a in results[0])


def test_machines_sharing_an_address_pick_again_then_fail_with_one_clear_error(tmp_path: Path) -> None:
    """Two single-rank machines both reached at 127.0.0.1: a first clash is picked again; a clash on
    every try is refused on both ranks, naming the clashing addresses and the fix."""
    once = _run(tmp_path / "once", world=2, local_world=1, collide=1)
    assert once[0] == once[1] and len(set(once[0])) == 2
    always = _run(tmp_path / "always", world=2, local_world=1, collide=distributed.ADDRESS_ATTEMPTS)
    assert (
        always[0]
        == always[1]
        == (
            "WorkerAddressClash: the trial's ranks could not get 2 different worker addresses in 3 tries "
            "(last: 127.0.0.1:40000, 127.0.0.1:40000); its machines' agents share an address: give each "
            "agent its own --address"
        )
    )
