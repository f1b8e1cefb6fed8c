"""Which ranks of a trial this agent runs, and where they meet: one process per slot, as torchrun
launches them (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass

from pedl.v1 import agent_pb2

# Never inherited from the agent's environment: the agent sets the first six per rank; a Keras
# trial's harness sets TF_CONFIG itself, from ports its ranks pick and share at the rendezvous.
DISTRIBUTED_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TF_CONFIG",
    "PEDL_AGENT_ADDRESS",
)


@dataclass(frozen=True)
class Ranks:
    """The ranks this agent runs of a trial: first_rank .. first_rank + local - 1 of world_size."""

    first_rank: int
    local: int
    world_size: int
    master_addr: str = ""
    master_port: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def plan_ranks(start: agent_pb2.StartTrial, free_port: Callable[[], int] = _free_port) -> Ranks:
    """One process per slot (one for a slot-less trial); the rendezvous the scheduler gave, or a free
    local port when this agent runs the whole trial from rank 0."""
    local = max(len(start.slot_ids), 1)
    world_size = start.world_size or local
    if world_size <= 1:
        return Ranks(0, 1, 1)
    if start.rank < 0 or start.rank + local > world_size:
        raise ValueError(
            f"StartTrial gives this agent ranks {start.rank}..{start.rank + local - 1} "
            f"(one per slot of {list(start.slot_ids)}), which do not fit world_size {world_size}"
        )
    if start.rendezvous_address:
        host, _, port = start.rendezvous_address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"StartTrial.rendezvous_address {start.rendezvous_address!r} is not host:port")
        return Ranks(start.rank, local, world_size, host.strip("[]"), int(port))
    if start.rank != 0 or local != world_size:
        raise ValueError(
            f"StartTrial for ranks {start.rank}..{start.rank + local - 1} of {world_size} spans several "
            "agents, so it needs the chief's rendezvous_address (host:port)"
        )
    return Ranks(0, local, world_size, "127.0.0.1", free_port())
