"""Leaving on notice: SIGUSR2 (a Slurm pilot job nearing its walltime) makes the agent ask the
scheduler to checkpoint and stop its trials, then exit once none is left.

The scheduler drives a trial's workloads, so only it can have the trial checkpoint at a step
boundary; the agent just says it is leaving and waits. The request is sent again while trials
remain, so a scheduler that restarted or a trial started meanwhile still hears of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sized

import structlog

from pedl.v1 import agent_pb2

from .outbox import Outbox

RESEND_SECONDS = 5.0
POLL_SECONDS = 0.2


def draining_message(reason: str) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(draining=agent_pb2.AgentDraining(reason=reason))


async def drain_when_asked(
    runs: Sized, outbox: Outbox, asked: asyncio.Event, stop: asyncio.Event, reason: str
) -> None:
    """Once `asked` is set: tells the scheduler, waits until `runs` (the agent's) is empty, then sets
    `stop`."""
    await asked.wait()
    log = structlog.get_logger(component="agent")
    log.info("agent draining: its trials checkpoint and stop, then it exits", running_trials=len(runs))
    loop = asyncio.get_running_loop()
    sent_at: float | None = None
    while len(runs) and not stop.is_set():
        if sent_at is None or loop.time() - sent_at >= RESEND_SECONDS:
            outbox.put(draining_message(reason))
            sent_at = loop.time()
        await asyncio.sleep(POLL_SECONDS)
    log.info("agent drained; exiting")
    stop.set()
