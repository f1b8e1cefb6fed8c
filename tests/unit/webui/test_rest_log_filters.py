"""Determined's log filters over pedl's lines: a pedl line has no agent, container or rank."""

from __future__ import annotations

import pytest

from pedl.v1 import common_pb2
from pedl_webui.gateway import GatewayError
from pedl_webui.rest.log_filters import FieldsSeen, LogFilter, Query

LINES = [
    common_pb2.LogLine(id=1, trial_id=3, timestamp="2026-01-02T00:01:00Z", source="stdout", message="step 1"),
    common_pb2.LogLine(id=2, trial_id=3, timestamp="2026-01-02T00:02:00Z", source="stderr", message="oops"),
    common_pb2.LogLine(
        id=3, trial_id=3, timestamp="2026-01-02T00:03:00.5Z", source="pedl", message="slot free"
    ),
]


def kept(**query: list[str]) -> list[int]:
    chosen = LogFilter.parse(Query(query))
    return [line.id for line in LINES if chosen.keeps(line)]


@pytest.mark.parametrize(
    "query, ids",
    [
        ({}, [1, 2, 3]),
        ({"rankIds": ["-1"]}, [1, 2, 3]),  # Determined's "no rank"
        ({"rankIds": ["0"]}, []),
        ({"rankIds": ["-2"]}, []),
        ({"agentIds": ["agent-1"]}, []),
        ({"containerIds": ["c"]}, []),
        ({"stdtypes": ["stderr"]}, [2]),
        ({"stdtypes": ["stdout"]}, [1, 3]),
        ({"sources": ["pedl"]}, [3]),
        ({"levels": ["LOG_LEVEL_ERROR", "LOG_LEVEL_CRITICAL"]}, [2]),
        ({"levels": ["LOG_LEVEL_INFO"]}, [1, 3]),
        ({"timestampAfter": ["2026-01-02T00:01:00Z"]}, [2, 3]),
        ({"timestampBefore": ["2026-01-02T00:02:30+00:00"]}, [1, 2]),
        ({"searchText": ["oop"]}, [2]),
        ({"searchText": ["step|slot"], "enableRegex": ["true"]}, [1, 3]),
        ({"searchText": ["step|slot"]}, []),
    ],
)
def test_each_filter_keeps_the_lines_determined_would(query: dict[str, list[str]], ids: list[int]) -> None:
    assert kept(**query) == ids


@pytest.mark.parametrize(
    "query, words",
    [
        ({"rankIds": ["one"]}, "rankIds must be integers"),
        ({"levels": ["LOUD"]}, "unknown log level 'LOUD'"),
        ({"timestampAfter": ["yesterday"]}, "timestampAfter must be an RFC 3339 time"),
        ({"searchText": ["("], "enableRegex": ["true"]}, "not a regular expression"),
    ],
)
def test_a_bad_filter_is_one_400_naming_it(query: dict[str, list[str]], words: str) -> None:
    with pytest.raises(GatewayError) as e:
        LogFilter.parse(Query(query))
    assert e.value.status == 400 and words in e.value.message


def test_fields_list_only_what_the_lines_have_and_say_when_a_value_is_new() -> None:
    seen = FieldsSeen(task=False)
    assert seen.add(LINES[:1]) and not seen.add(LINES[:1])
    assert seen.add(LINES)
    assert seen.json() == {
        "agentIds": [],
        "containerIds": [],
        "rankIds": [],
        "stdtypes": ["stderr", "stdout"],
        "sources": ["pedl", "stderr", "stdout"],
    }
    assert FieldsSeen(task=True).json()["allocationIds"] == []
