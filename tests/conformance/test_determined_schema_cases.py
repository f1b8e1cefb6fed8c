"""pedl's config parser against what Determined's schema test cases establish.

The cases (determined_schema_cases.yaml) restate, in our own fragments, which shapes Determined's
schema accepts, which it rejects, and which defaults it fills. A fragment pedl refuses counts as
agreeing when the refusal names a field of the fragment: pedl then does not pretend to do it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from pedl.config import ConfigError, parse_experiment_config

CASES = yaml.safe_load((Path(__file__).parent / "determined_schema_cases.yaml").read_text())
BASE: dict[str, Any] = {"searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 10}}}


def _place(at: str, fragment: Any) -> dict[str, Any]:
    if not at:
        return copy.deepcopy(fragment)
    config = copy.deepcopy(BASE)
    parts = at.split(".")
    if parts[0] == "searcher" and len(parts) == 1:
        config.pop("searcher")
    node = config
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = copy.deepcopy(fragment)
    return config


def _get(raw: dict[str, Any], dotted: str) -> Any:
    node: Any = raw
    for part in dotted.split("."):
        node = node[part]
    return node


@pytest.mark.parametrize("case", CASES, ids=[c["what"] for c in CASES])
def test_determined_case(case: dict[str, Any]) -> None:
    config = _place(case["at"], case["fragment"])
    expect = case["expect"]
    if expect == "invalid":
        with pytest.raises(ConfigError) as info:
            parse_experiment_config(config)
        assert info.value.path.startswith(case["field"]), str(info.value)
        return
    try:
        parsed = parse_experiment_config(config)
    except ConfigError as e:
        if expect == "valid" and "not supported by pedl" in e.message:
            assert e.path.startswith(case["at"].split(".")[0] or e.path), str(e)
            return
        raise
    if expect == "defaults":
        for dotted, value in case["defaults"].items():
            assert _get(parsed.raw, dotted) == value, dotted
    # What pedl accepted, it accepts again as it stored it (describe / re-submit).
    assert parse_experiment_config(parsed.raw).raw == parsed.raw
