"""`pedl cluster status` prints each uptime as one word, so scripts can split its columns on spaces."""

from __future__ import annotations

import pytest

from pedl.cluster.status import human_duration


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0s"), (59.9, "59s"), (113, "1m53s"), (3600 + 120, "1h2m"), (86400 * 3 + 3600 * 4, "3d4h")],
)
def test_an_uptime_is_one_word(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown
    assert len(human_duration(seconds).split()) == 1
