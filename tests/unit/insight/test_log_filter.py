"""The trial log's filter: a line's level and rank as it says them, and what passes text, level
and rank criteria (the web UI's trial page and its filtered download)."""

from __future__ import annotations

import pytest

from pedl.log_filter import log_fields, log_matches


@pytest.mark.parametrize(
    ("line", "fields"),
    [
        ("[rank 1] 2024-05-01 WARNING:root:slow loader", ("WARNING", 1)),
        ('{"event": "checkpoint stored", "level": "info"}', ("INFO", None)),
        ("[rank 0] FATAL: out of memory", ("CRITICAL", 0)),
        ("epoch 3 loss 0.25", (None, None)),
    ],
)
def test_a_lines_level_and_rank_are_what_it_says(line: str, fields: tuple) -> None:
    assert log_fields(line) == fields


def test_text_level_and_rank_each_narrow_the_lines() -> None:
    lines = ["[rank 0] INFO start", "[rank 1] ERROR NaN loss", "[rank 1] WARNING slow", "plain output"]
    assert [x for x in lines if log_matches(x, text="nan")] == ["[rank 1] ERROR NaN loss"]
    assert [x for x in lines if log_matches(x, level="WARNING")] == lines[1:3]
    assert [x for x in lines if log_matches(x, rank=0)] == ["[rank 0] INFO start"]
    assert all(log_matches(x) for x in lines)  # no criteria: every line
