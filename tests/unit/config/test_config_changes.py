"""`with_changes`: the settings PatchExperiment changes, applied to a parsed config without parsing it
again, checked by the schema, and refused for sections whose derived values would go stale."""

from __future__ import annotations

from typing import Any

import pytest

from pedl.config import ConfigError, parse_experiment_config
from pedl.config.changes import with_changes

CONFIG = parse_experiment_config(
    "searcher: {name: single, metric: error, max_length: {batches: 50}}\nresources: {max_slots: 2}\n"
)


def test_a_change_keeps_what_parsing_derived_and_leaves_the_original_alone() -> None:
    def cap(sections: dict[str, Any]) -> None:
        sections["resources"]["max_slots"] = 8
        sections["name"] = "wide"

    changed = with_changes(CONFIG, cap)
    assert (changed.resources.max_slots, changed.name) == (8, "wide")
    assert changed.max_length == CONFIG.max_length == 50 and changed.searcher is CONFIG.searcher
    assert CONFIG.resources.max_slots == 2 and CONFIG.name is None


def test_a_bad_value_names_the_field() -> None:
    def negative(sections: dict[str, Any]) -> None:
        sections["checkpoint_storage"]["save_trial_best"] = -1

    with pytest.raises(ConfigError, match="checkpoint_storage.save_trial_best: must be at least 0"):
        with_changes(CONFIG, negative)


def test_a_section_with_derived_values_is_refused() -> None:
    def lengthen(sections: dict[str, Any]) -> None:
        sections["searcher"] = {"name": "single", "metric": "error", "max_length": {"batches": 99}}

    with pytest.raises(ValueError, match="searcher"):
        with_changes(CONFIG, lengthen)
