"""What a trial's log line says about itself (level, rank) and the log filter of the web UI's trial
page and its download (pure)."""

from __future__ import annotations

import json
import re

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_RANK = re.compile(r"^\[rank (\d+)\] ")
_LEVEL = re.compile(r"\b(DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\b")


def log_fields(message: str) -> tuple[str | None, int | None]:
    """A log line's level and the rank that wrote it, as far as the line says: the agent prefixes a
    distributed trial's lines with "[rank r] "; the level is a structlog record's, else the first
    level word in the line's first 80 characters (Python's logging and most libraries write one)."""
    match = _RANK.match(message)
    rank = int(match.group(1)) if match else None
    text = message[match.end() :] if match else message
    level: str | None = None
    if text.startswith("{"):
        try:
            record = json.loads(text)
            level = str(record.get("level", "")).upper() or None if isinstance(record, dict) else None
        except ValueError:
            pass
    if level is None:
        found = _LEVEL.search(text[:80])
        level = found.group(1) if found else None
    return {"WARN": "WARNING", "FATAL": "CRITICAL"}.get(level or "", level), rank


def log_matches(message: str, text: str = "", level: str = "", rank: int | None = None) -> bool:
    """Whether a line passes the log filter: containing `text` (any case), at `level` or above,
    written by `rank`; an empty criterion lets every line through."""
    if text and text.lower() not in message.lower():
        return False
    if not level and rank is None:
        return True
    found_level, found_rank = log_fields(message)
    if rank is not None and found_rank != rank:
        return False
    if level in LOG_LEVELS:
        return found_level in LOG_LEVELS and LOG_LEVELS.index(found_level) >= LOG_LEVELS.index(level)
    return True
