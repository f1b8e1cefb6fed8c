"""How a run's harness processes end: exit codes polled, a failing rank ending the others, and
which failure to report."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from pedl.harness.distributed import PEER_FAILED_EXIT_CODE

# How often exit codes are polled while a run's processes live: each poll may add this to a slot's idle time.
EXIT_POLL_SECONDS = 0.02


class Exitable(Protocol):
    @property
    def returncode(self) -> int | None: ...


async def all_exited(
    procs: Sequence[Exitable], grace_seconds: float, kill_all: Callable[[list[tuple[int, int]]], None]
) -> list[tuple[int, int]]:
    """(index, exit code) of every process in the order they exited.

    A rank failing kills the others at once. A rank that only lost a peer (PEER_FAILED_EXIT_CODE)
    waits up to the kill grace period for the peer at fault to exit on its own and be reported.
    Exit codes are polled: `Process.wait()` also waits for the pipes to close, which a surviving
    child of a harness can delay forever.
    """
    exits: list[tuple[int, int]] = []
    loop = asyncio.get_running_loop()
    peer_failed_at: float | None = None
    killed = False
    while True:
        for index, proc in enumerate(procs):
            if proc.returncode is not None and all(i != index for i, _ in exits):
                exits.append((index, proc.returncode))
        if len(exits) == len(procs):
            return exits
        codes = [code for _, code in exits if code != 0]
        if codes and not killed:
            if any(code != PEER_FAILED_EXIT_CODE for code in codes):
                killed = True
            elif peer_failed_at is None:
                peer_failed_at = loop.time()
            elif loop.time() - peer_failed_at > grace_seconds:
                killed = True
            if killed:
                kill_all(exits)
        await asyncio.sleep(EXIT_POLL_SECONDS)


def culprit(exits: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The failed process whose error to report: a real failure before a lost peer before a signal."""
    failed = [(i, code) for i, code in exits if code != 0]
    for wanted in (
        lambda c: c > 0 and c != PEER_FAILED_EXIT_CODE,
        lambda c: c == PEER_FAILED_EXIT_CODE,
        lambda c: True,
    ):
        for index, code in failed:
            if wanted(code):
                return index, code
    return None


def outcome(
    exits: list[tuple[int, int]], tails: Sequence[Sequence[str]], first_rank: int | None
) -> tuple[int, str]:
    """The run's exit code and error from its processes' exits: the first to fail, with its stderr's
    tail (`first_rank`: the first local rank of a run of several processes, None for one)."""
    found = culprit(exits)
    if found is None:
        return 0, ""
    index, code = found
    stderr_tail = "\n".join(tails[index])
    if first_rank is None:
        return code, stderr_tail or f"the harness exited with code {code} and wrote nothing to stderr"
    rank = first_rank + index
    if stderr_tail:
        return code, f"rank {rank} failed with exit code {code}:\n{stderr_tail}"
    return code, f"rank {rank} exited with code {code} and wrote nothing to stderr"
