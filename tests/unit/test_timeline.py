"""A trial's timeline as `pedl trial describe` shows it and benchmarks summarise it."""

from __future__ import annotations

import pytest

from pedl.cli.render import timeline_table
from pedl.timeline import phase_medians, timeline_records
from pedl.v1 import common_pb2


def _phase(
    name: str, start: float, end: float, run_id: int = 1, source: str = "agent"
) -> common_pb2.TimelinePhase:
    return common_pb2.TimelinePhase(name=name, start=start, end=end, source=source, run_id=run_id)


def test_records_are_run_by_run_with_offsets_from_the_runs_first_phase() -> None:
    records = timeline_records(
        [
            _phase("train step", 1010.5, 1011.0, run_id=2),
            _phase("slot assigned", 1000.0, 1000.0, source="scheduler"),
            _phase("slot assigned", 1010.0, 1010.0, run_id=2, source="scheduler"),
            _phase("process spawned", 1000.2, 1000.25),
        ]
    )
    assert [(r["run_id"], r["name"], r["offset_seconds"], r["seconds"]) for r in records] == [
        (1, "slot assigned", 0.0, 0.0),
        (1, "process spawned", 0.2, 0.05),
        (2, "slot assigned", 0.0, 0.0),
        (2, "train step", 0.5, 0.5),
    ]


def test_the_table_names_each_phase_and_who_timed_it() -> None:
    text = timeline_table(
        [_phase("slot assigned", 5.0, 5.0, source="scheduler"), _phase("imports", 5.5, 6.75)]
    )
    assert "PHASE" in text and "imports" in text and "1.250" in text and "scheduler" in text


def test_medians_sum_repeated_phases_per_run_and_measure_the_slot_held() -> None:
    runs = [
        [
            {"name": "slot assigned", "start": 0.0, "end": 0.0},
            {"name": "train step", "start": 1.0, "end": 2.0},
            {"name": "train step", "start": 2.0, "end": 3.0},
            {"name": "slot free", "start": 4.0, "end": 4.0},
        ],
        [
            {"name": "slot assigned", "start": 0.0, "end": 0.0},
            {"name": "train step", "start": 1.0, "end": 5.0},
            {"name": "slot free", "start": 6.0, "end": 6.0},
        ],
    ]
    medians = phase_medians(runs)
    assert medians["train step"] == pytest.approx(3.0)
    assert medians["slot held"] == pytest.approx(5.0)
