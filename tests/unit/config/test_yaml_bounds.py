"""YAML that would cost the CLI or the scheduler gigabytes or a stack overflow is refused, in one
line naming where, before anything is expanded; a config using anchors as people do still loads."""

from __future__ import annotations

import pytest

from pedl.config import ConfigError, parse_experiment_config
from pedl.config.yaml_bounds import MAX_ALIASES, MAX_DEPTH

S = "searcher:\n  name: single\n  metric: loss\n  max_length:\n    batches: 10\n"


def alias_bomb(levels: int = 9) -> str:
    """The classic "billion laughs": each level lists the previous one nine times (~500 bytes)."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def refused(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        parse_experiment_config(text, filename="exp.yaml")
    assert "\n" not in str(e.value)
    return e.value


@pytest.mark.parametrize("levels", [9, 11])
def test_an_alias_bomb_is_refused_before_expansion(levels: int) -> None:
    bomb = alias_bomb(levels)
    assert len(bomb) < 800
    error = refused(bomb)
    assert "aliases expanded" in str(error) and error.line is not None and error.line <= levels + 1


def test_too_many_aliases_are_refused() -> None:
    text = "a: &a 1\nb: [" + ",".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    assert f"more than {MAX_ALIASES} aliases" in str(refused(text))


@pytest.mark.parametrize(
    "text",
    [
        "x: " + "[" * 10_000 + "]" * 10_000 + "\n",
        "x: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n",
        "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 2)) + "  " * (MAX_DEPTH + 2) + "v\n",
    ],
    ids=["flow-lists", "flow-maps", "block"],
)
def test_deep_nesting_is_refused_in_one_line(text: str) -> None:
    assert f"nested more than {MAX_DEPTH} levels deep" in str(refused(text))


def test_a_config_with_anchors_as_people_write_them_loads() -> None:
    text = S + "hyperparameters:\n  base: &base {type: const, val: 1}\n  other: *base\n  more: *base\n"
    config = parse_experiment_config(text)
    assert config.raw["hyperparameters"]["other"] == {"type": "const", "val": 1}
