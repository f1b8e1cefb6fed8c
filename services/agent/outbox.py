"""Messages for the scheduler, kept while the stream is down so nothing a trial reports is lost."""

from __future__ import annotations

import asyncio
from collections import deque

from pedl.v1 import agent_pb2

# Beyond this many buffered messages the oldest log batches are dropped (results and exits never are).
DEFAULT_MAX_MESSAGES = 20_000


class Outbox:
    """FIFO of ConnectRequests with peek-then-pop, so a message whose write failed is sent again."""

    def __init__(self, max_messages: int = DEFAULT_MAX_MESSAGES) -> None:
        self._items: deque[agent_pb2.ConnectRequest] = deque()
        self._max = max_messages
        self._changed = asyncio.Event()
        self.dropped_log_batches = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, message: agent_pb2.ConnectRequest) -> None:
        self._items.append(message)
        if len(self._items) > self._max:
            self._drop_oldest_logs()
        self._changed.set()

    def has_result(self, trial_id: int, run_id: int) -> bool:
        """Whether a workload result of that run is still waiting to be sent."""
        for m in self._items:
            if m.WhichOneof("message") == "workload_completed":
                w = m.workload_completed.result.workload
                if w.trial_id == trial_id and w.run_id == run_id:
                    return True
        return False

    def _drop_oldest_logs(self) -> None:
        for i, m in enumerate(self._items):
            if m.WhichOneof("message") == "trial_logs":
                del self._items[i]
                self.dropped_log_batches += 1
                return

    async def peek(self, timeout: float | None = None) -> agent_pb2.ConnectRequest | None:
        """The oldest message, waiting up to `timeout` seconds for one; None when none came."""
        if not self._items:
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except asyncio.TimeoutError:
                return None
        return self._items[0] if self._items else None

    def pop(self) -> agent_pb2.ConnectRequest:
        message = self._items.popleft()
        self._changed.set()
        return message

    def peek_many(self, max_messages: int, max_bytes: int) -> list[agent_pb2.ConnectRequest]:
        """The oldest messages (at least one), up to the bounds; `pop_many` removes them once sent."""
        taken: list[agent_pb2.ConnectRequest] = []
        size = 0
        for message in self._items:
            if taken and (len(taken) >= max_messages or size >= max_bytes):
                break
            taken.append(message)
            size += message.ByteSize()
        return taken

    def pop_many(self, sent: list[agent_pb2.ConnectRequest]) -> None:
        """Removes the messages `peek_many` returned (by identity: a full outbox may have dropped a
        log batch among them meanwhile)."""
        for message in sent:
            if self._items and self._items[0] is message:
                self._items.popleft()
            else:
                for i, item in enumerate(self._items):
                    if item is message:
                        del self._items[i]
                        break
        self._changed.set()

    async def drained(self, timeout: float) -> bool:
        """Waits until everything was sent (True) or `timeout` passed (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._items:
            left = deadline - loop.time()
            if left <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                return not self._items
        return True
