"""A trial's timeline as records: what `pedl trial describe` shows and benchmarks summarise.

Each phase is timed where it happened (scheduler, agent, harness); offsets are from the run's
"slot assigned", so phases of one run read as a profile of where its slot time went.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from typing import Any

from pedl.v1 import common_pb2


def timeline_records(phases: Iterable[common_pb2.TimelinePhase]) -> list[dict[str, Any]]:
    """One record per phase, run by run: name, source, run_id, start/end (epoch seconds), the offset
    from the run's first phase and the duration (seconds, rounded to milliseconds)."""
    by_run: dict[int, list[common_pb2.TimelinePhase]] = {}
    for p in phases:
        by_run.setdefault(p.run_id, []).append(p)
    out = []
    for run_id in sorted(by_run):
        run = sorted(by_run[run_id], key=lambda p: (p.start, p.end))
        origin = run[0].start
        for p in run:
            out.append(
                {
                    "run_id": run_id,
                    "name": p.name,
                    "source": p.source,
                    "start": p.start,
                    "end": p.end,
                    "offset_seconds": round(p.start - origin, 3),
                    "seconds": round(p.end - p.start, 3),
                }
            )
    return out


def phase_kind(name: str) -> str:
    """A phase's name without a trailing number, so that repeated phases group together."""
    return re.sub(r"\s+\d+$", "", name)


def phase_medians(runs: Iterable[Iterable[dict[str, Any]]]) -> dict[str, float]:
    """Median seconds per phase over many runs (each run's repeated phases summed first), plus
    "slot held": slot assigned to slot free."""
    per_phase: dict[str, list[float]] = {}
    for run in runs:
        totals: dict[str, float] = {}
        assigned = free = None
        for r in run:
            kind = phase_kind(r["name"])
            totals[kind] = totals.get(kind, 0.0) + r["end"] - r["start"]
            if kind == "slot assigned":
                assigned = r["start"]
            elif kind == "slot free":
                free = r["end"]
        if assigned is not None and free is not None:
            totals["slot held"] = free - assigned
        for kind, seconds in totals.items():
            per_phase.setdefault(kind, []).append(seconds)
    return {kind: statistics.median(values) for kind, values in per_phase.items()}
