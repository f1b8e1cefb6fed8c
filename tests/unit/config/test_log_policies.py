"""log_policies: labelling-only policies (Determined's defaults) load with a warning; actions are refused."""

from __future__ import annotations

import pytest

from pedl.config import ConfigError, parse_experiment_config

SEARCHER = "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n"
DEFAULTS = (
    "log_policies:\n"
    "  - {name: CUDA OOM, pattern: '.*CUDA out of memory.*'}\n"
    "  - {name: ECC Error, pattern: '.*uncorrectable ECC error encountered.*', action: null}\n"
)


def test_an_exported_configs_default_policies_load_with_a_warning() -> None:
    config = parse_experiment_config(SEARCHER + DEFAULTS, filename="c.yaml")
    assert [w for w in config.warnings if w.startswith("log_policies:")]
    assert config.raw["log_policies"][1] == {
        "name": "ECC Error",
        "pattern": ".*uncorrectable ECC error encountered.*",
    }
    assert parse_experiment_config(config.raw).raw == config.raw


@pytest.mark.parametrize(
    ("policies", "field", "words"),
    [
        (
            "[{name: oom, pattern: OOM, action: cancel_retries}]",
            "log_policies[0].action",
            "not supported by pedl",
        ),
        ("[{pattern: OOM, action: {type: exclude_node}}]", "log_policies[0].action", "not supported by pedl"),
        ("[{name: oom, pattern: OOM, action: retry_forever}]", "log_policies[0].action", "must be one of"),
        ("[{name: oom, action: {type: nope}}]", "log_policies[0].action", "must be one of"),
        ("[{pattern: OOM}]", "log_policies[0]", "needs a name"),
        ("[{name: oom, severity: 3}]", "log_policies[0].severity", "unknown"),
        ("[{name: 7}]", "log_policies[0].name", "string"),
        ("{name: oom}", "log_policies", "list"),
    ],
)
def test_bad_or_acting_policies_are_refused_naming_the_field(policies: str, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(SEARCHER + f"log_policies: {policies}\n", filename="c.yaml")
    assert info.value.path == field and info.value.line == 2, str(info.value)
    assert words in info.value.message
