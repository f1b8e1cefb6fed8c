"""A trial's output lines: batched to the scheduler as trial_logs, with a bounded local copy.

The scheduler holds a trial's logs; the agent's trial.log is only a bounded buffer of the latest
output (for looking at while the scheduler is unreachable): past `file_bytes` it moves to trial.log.1
and starts again, so at most twice that stays on disk. A run that prints more than `limit_bytes` has
the rest dropped, and one line at its end says how much.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TextIO

from pedl._timeutil import utc_now
from pedl.v1 import agent_pb2, common_pb2

FLUSH_SECONDS = 0.2
FLUSH_LINES = 200
# Longer lines are split so one runaway line cannot exhaust memory (pedl-agent --max-log-line-bytes).
MAX_LINE_BYTES = 64 * 1024
STDERR_TAIL_LINES = 40
# trial.log moves to trial.log.1 past this many bytes (pedl-agent --trial-log-file-bytes).
FILE_BYTES = 4 * 1024 * 1024


async def iter_lines(stream: asyncio.StreamReader, max_bytes: int = MAX_LINE_BYTES) -> AsyncIterator[str]:
    """Decoded lines without their line ending, including a last unterminated one; a line longer
    than `max_bytes` comes as several."""
    buf = b""
    while True:
        chunk = await stream.read(max_bytes)
        if not chunk:
            break
        buf += chunk
        while True:
            nl = buf.find(b"\n", 0, max_bytes + 1)
            if nl >= 0:
                yield buf[:nl].rstrip(b"\r").decode("utf-8", errors="replace")
                buf = buf[nl + 1 :]
            elif len(buf) >= max_bytes:
                yield buf[:max_bytes].decode("utf-8", errors="replace")
                buf = buf[max_bytes:]
            else:
                break
    if buf:
        yield buf.rstrip(b"\r").decode("utf-8", errors="replace")


class LogRelay:
    """Collects lines of one trial run and sends them in batches through `send`."""

    def __init__(
        self,
        trial_id: int,
        run_id: int,
        send: Callable[[agent_pb2.ConnectRequest], None],
        log_file: Path,
        flush_seconds: float = FLUSH_SECONDS,
        flush_lines: int = FLUSH_LINES,
        limit_bytes: int = 0,
        file_bytes: int = FILE_BYTES,
    ) -> None:
        self.trial_id = trial_id
        self._limit = limit_bytes  # 0: no cap (pedl-agent --trial-log-limit)
        self._shipped_bytes = 0
        self.dropped_lines = 0
        self.dropped_bytes = 0
        self._log_file = log_file
        self._file_bytes = file_bytes
        self._written = 0
        self.run_id = run_id
        self._send = send
        self._flush_seconds = flush_seconds
        self._flush_lines = flush_lines
        self._pending: list[common_pb2.LogLine] = []
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO | None = open(log_file, "a", encoding="utf-8")  # noqa: SIM115
        self._written = self._file.tell()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, source: str, message: str) -> None:
        if source == "stderr":
            self.stderr_tail.append(message)
        if self._limit and source != "pedl":
            size = len(message.encode("utf-8", errors="replace")) + 1
            if self._shipped_bytes + size > self._limit:
                self.dropped_lines += 1
                self.dropped_bytes += size
                return
            self._shipped_bytes += size
        self._append(source, message)

    def _append(self, source: str, message: str) -> None:
        ts = utc_now()
        if self._file is not None:
            entry = f"{ts} [{source}] {message}\n"
            if self._file_bytes and self._written + len(entry) > self._file_bytes and self._written:
                self._rotate()
            self._file.write(entry)
            self._written += len(entry)
        self._pending.append(
            common_pb2.LogLine(
                trial_id=self.trial_id, run_id=self.run_id, timestamp=ts, source=source, message=message
            )
        )
        if len(self._pending) >= self._flush_lines:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._flush_seconds, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._file is not None:
            self._file.flush()
        if not self._pending:
            return
        lines, self._pending = self._pending, []
        self._send(
            agent_pb2.ConnectRequest(
                trial_logs=agent_pb2.TrialLogs(trial_id=self.trial_id, run_id=self.run_id, lines=lines)
            )
        )

    def _rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        self._log_file.replace(self._log_file.with_name(self._log_file.name + ".1"))
        self._file = open(self._log_file, "a", encoding="utf-8")  # noqa: SIM115
        self._written = 0

    def dropped_summary(self) -> str:
        return (
            f"pedl: dropped {self.dropped_lines} lines ({self.dropped_bytes} bytes) of this run's output "
            f"past the agent's per-trial log limit of {self._limit} bytes (pedl-agent --trial-log-limit)"
        )

    async def pump(self, stream: asyncio.StreamReader, source: str) -> None:
        async for line in iter_lines(stream):
            self.add(source, line)

    def close(self) -> None:
        if self.dropped_lines:
            self._append("pedl", self.dropped_summary())
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None
