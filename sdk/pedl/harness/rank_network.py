"""Where the ranks of a trial spanning machines listen, and proof that they reach each other.

gloo and NCCL listen on the interface GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME names, else on the
address the hostname resolves to, which Debian's and Ubuntu's default /etc/hosts map to loopback:
each rank then tells the others to reach it at 127.0.0.1, and gloo fails with a bare "Connection
refused" on every restart. So the harness names the interface carrying its agent's address (the one
other machines reach it on) unless the user named one, and before the process group starts every
rank connects once to every other rank's listening address: if one cannot, all ranks fail with one
error listing each rank's address, which the scheduler does not restart (a restart would not help).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from pedl import _interfaces

GLOO_VARIABLE = "GLOO_SOCKET_IFNAME"
NCCL_VARIABLE = "NCCL_SOCKET_IFNAME"
CONNECT_TIMEOUT_S = 5.0
# How long the chief keeps the rendezvous store up for the others to read the probe's outcome.
DONE_WAIT_S = 30.0
_PREFIX = "pedl-reachability"


class RanksUnreachable(RuntimeError):
    """A trial's ranks cannot connect to each other: a network setting, which no restart changes."""


def spans_machines(world_size: int, local_world_size: int) -> bool:
    return local_world_size < world_size


def choose_interfaces(environ: MutableMapping[str, str]) -> str | None:
    """Sets GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME (each unless set) to the interface carrying the
    agent's address (PEDL_AGENT_ADDRESS); returns that interface, None when none here carries it."""
    address = environ.get("PEDL_AGENT_ADDRESS", "")
    interface = _interfaces.interface_for(address) if address else None
    if interface is None:
        return None
    environ.setdefault(GLOO_VARIABLE, interface)
    environ.setdefault(NCCL_VARIABLE, f"={interface}")  # '=': that name exactly, not a prefix
    return interface


@dataclass(frozen=True)
class Listening:
    """Where one rank listens, and why there."""

    rank: int
    host: str
    port: int
    reason: str

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def listen_host(environ: Mapping[str, str]) -> tuple[str, str]:
    """The address gloo binds to, as gloo picks it, and a phrase saying why."""
    names = [n.strip() for n in environ.get(GLOO_VARIABLE, "").split(",") if n.strip()]
    if names:
        host = _interfaces.first_address(names[0])
        if host is None:
            raise RanksUnreachable(
                f"{GLOO_VARIABLE}={names[0]} names no interface with an address on this machine "
                f"(its interfaces: {_interfaces.describe()})"
            )
        return host, f"{GLOO_VARIABLE}={environ[GLOO_VARIABLE]}"
    hostname = socket.gethostname()
    try:
        return socket.gethostbyname(hostname), f"hostname {hostname}, {GLOO_VARIABLE} unset"
    except OSError:
        return "127.0.0.1", f"hostname {hostname} does not resolve, {GLOO_VARIABLE} unset"


def _can_connect(target: Listening) -> str:
    """Why a TCP connection to `target` does not open ("" when it does)."""
    try:
        with socket.create_connection((target.host, target.port), timeout=CONNECT_TIMEOUT_S):
            return ""
    except OSError as e:
        return e.strerror or str(e)


def check_reachable(store: Any, rank: int, world_size: int, environ: Mapping[str, str] = os.environ) -> None:
    """Every rank connects to every other's listening address; all raise RanksUnreachable together
    if any connection fails. `store` is the trial's rendezvous store (torch.distributed.Store)."""
    listener: socket.socket | None = None
    try:
        host, reason = listen_host(environ)
        listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((host, 0))
        listener.listen(world_size * 2)  # the kernel completes the handshakes; nothing need accept
        mine = Listening(rank, host, int(listener.getsockname()[1]), reason)
    except (RanksUnreachable, OSError) as e:  # still published: the others must not wait for it
        mine = Listening(rank, "", 0, f"cannot listen: {e}")
    try:
        store.set(f"{_PREFIX}/listen/{rank}", json.dumps(mine.__dict__))
        everyone = [
            Listening(**json.loads(store.get(f"{_PREFIX}/listen/{r}").decode())) for r in range(world_size)
        ]
        failures = {r.rank: _can_connect(r) for r in everyone if r.rank != rank and r.port}
        store.set(f"{_PREFIX}/result/{rank}", json.dumps({str(k): v for k, v in failures.items() if v}))
        outcome = {r: json.loads(store.get(f"{_PREFIX}/result/{r}").decode()) for r in range(world_size)}
        _finish(store, rank, world_size)
    finally:
        if listener is not None:
            listener.close()
    if any(outcome.values()) or not all(r.port for r in everyone):
        raise RanksUnreachable(unreachable_message(everyone, outcome))


def _finish(store: Any, rank: int, world_size: int) -> None:
    """The chief (whose process holds the store) waits until every rank has read the outcome."""
    done = store.add(f"{_PREFIX}/done", 1)
    deadline = time.monotonic() + DONE_WAIT_S
    while rank == 0 and done < world_size and time.monotonic() < deadline:
        time.sleep(0.05)
        done = store.add(f"{_PREFIX}/done", 0)


def unreachable_message(everyone: list[Listening], outcome: Mapping[int, Mapping[str, str]]) -> str:
    lines = [
        "the trial's ranks cannot reach each other; not restarted, as every run would fail the same way:"
    ]
    lines += [
        f"  rank {r.rank} listens on {r.address} ({r.reason})" if r.port else f"  rank {r.rank} {r.reason}"
        for r in everyone
    ]
    by_rank = {r.rank: r for r in everyone}
    for rank, failed in sorted(outcome.items()):
        for peer, why in sorted(failed.items(), key=lambda kv: int(kv[0])):
            target = by_rank[int(peer)].address
            lines.append(f"  rank {rank} cannot connect to rank {peer} at {target}: {why}")
    lines.append(
        f"Ranks listen on the interface {GLOO_VARIABLE} names ({NCCL_VARIABLE} for NCCL on GPUs); pedl sets "
        "both to the interface carrying the agent's address unless they are set. Set them to the interface "
        "other machines reach (experiment config environment.environment_variables, or the agents' "
        "environment), or start each pedl-agent with --address set to the address other machines reach it on."
    )
    return "\n".join(lines)
