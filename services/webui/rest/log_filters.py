"""Determined's log filters and log fields over pedl's trial log lines, pure (no I/O).

A pedl line carries its trial, time, source (stdout, stderr, or pedl's own) and text; it has no
agent, container or rank of its own, so it answers Determined's filters as a line without them:
`rankIds=-1` (Determined's "no rank") keeps every line, any other rank or an agent/container id
keeps none, and the fields listing offers only the stdtypes and sources the lines have."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from pedl.v1 import common_pb2
from pedl_webui.gateway import GatewayError

NO_RANK = -1
LEVELS = (
    "LOG_LEVEL_UNSPECIFIED",
    "LOG_LEVEL_TRACE",
    "LOG_LEVEL_DEBUG",
    "LOG_LEVEL_INFO",
    "LOG_LEVEL_WARNING",
    "LOG_LEVEL_ERROR",
    "LOG_LEVEL_CRITICAL",
)


def stdtype(line: common_pb2.LogLine) -> str:
    return line.source if line.source in ("stdout", "stderr") else "stdout"


def level(line: common_pb2.LogLine) -> str:
    return "LOG_LEVEL_ERROR" if line.source == "stderr" else "LOG_LEVEL_INFO"


class Query:
    """The repeated query parameters of a request (Starlette's multi-dict, or a plain dict in tests)."""

    def __init__(self, values: Mapping[str, Sequence[str]]) -> None:
        self.values = values

    def strings(self, name: str) -> frozenset[str]:
        return frozenset(v for v in self.values.get(name, ()) if v != "")

    def one(self, name: str) -> str:
        found = [v for v in self.values.get(name, ()) if v != ""]
        return found[-1] if found else ""


def _time(name: str, raw: str) -> datetime | None:
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        message = f"query parameter {name} must be an RFC 3339 time, got {raw[:40]!r}"
        raise GatewayError(400, message) from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _ranks(raw: Iterable[str]) -> frozenset[int]:
    try:
        return frozenset(int(v) for v in raw)
    except ValueError:
        raise GatewayError(400, f"query parameter rankIds must be integers, got {sorted(raw)[:3]}") from None


@dataclass(frozen=True)
class LogFilter:
    """Which lines a logs request keeps; an empty set means that field is not filtered."""

    agent_ids: frozenset[str] = frozenset()
    container_ids: frozenset[str] = frozenset()
    allocation_ids: frozenset[str] = frozenset()
    rank_ids: frozenset[int] = frozenset()
    levels: frozenset[str] = frozenset()
    stdtypes: frozenset[str] = frozenset()
    sources: frozenset[str] = frozenset()
    before: datetime | None = None
    after: datetime | None = None
    search: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, query: Query) -> LogFilter:
        levels = query.strings("levels")
        if unknown := sorted(levels - set(LEVELS)):
            known = ", ".join(LEVELS[1:])
            raise GatewayError(400, f"unknown log level {unknown[0][:40]!r}; levels are {known}")
        text = query.one("searchText")
        regex = query.one("enableRegex").lower() in ("true", "1")
        try:
            search = re.compile(text if regex else re.escape(text)) if text else None
        except re.error as e:
            raise GatewayError(400, f"searchText is not a regular expression: {e}") from None
        return cls(
            agent_ids=query.strings("agentIds"),
            container_ids=query.strings("containerIds"),
            allocation_ids=query.strings("allocationIds"),
            rank_ids=_ranks(query.strings("rankIds")),
            levels=levels,
            stdtypes=query.strings("stdtypes"),
            sources=query.strings("sources"),
            before=_time("timestampBefore", query.one("timestampBefore")),
            after=_time("timestampAfter", query.one("timestampAfter")),
            search=search,
        )

    @property
    def everything(self) -> bool:
        return self == LogFilter()

    def keeps(self, line: common_pb2.LogLine) -> bool:
        if self.agent_ids or self.container_ids or self.allocation_ids:
            return False  # a pedl line has none of these ids
        if self.rank_ids and NO_RANK not in self.rank_ids:
            return False
        if self.levels and level(line) not in self.levels:
            return False
        if self.stdtypes and stdtype(line) not in self.stdtypes:
            return False
        if self.sources and line.source not in self.sources:
            return False
        if self.before or self.after:
            at = _time("timestamp", line.timestamp)
            if at is None or (self.before and at >= self.before) or (self.after and at <= self.after):
                return False
        return not self.search or bool(self.search.search(line.message))


class FieldsSeen:
    """The distinct values of Determined's log fields over the lines seen so far."""

    def __init__(self, task: bool) -> None:
        self.task = task
        self.stdtypes: set[str] = set()
        self.sources: set[str] = set()

    def add(self, lines: Iterable[common_pb2.LogLine]) -> bool:
        """Take in `lines`; True when a value is new."""
        before = len(self.stdtypes) + len(self.sources)
        for line in lines:
            self.stdtypes.add(stdtype(line))
            self.sources.add(line.source)
        return len(self.stdtypes) + len(self.sources) > before

    def json(self) -> dict[str, list[str] | list[int]]:
        value: dict[str, list[str] | list[int]] = {
            "agentIds": [],
            "containerIds": [],
            "rankIds": [],
            "stdtypes": sorted(self.stdtypes),
            "sources": sorted(self.sources),
        }
        return {"allocationIds": [], **value} if self.task else value
