"""`det experiment create --config KEY=VALUE`: Determined's command-line overrides of the config file.

`searcher.max_trials=4` sets one field by its dotted path (sections made as needed); the value is read
as YAML, so `4` is an integer, `[1, 2]` a list and `'4'` a string, as Determined reads it.
"""

from __future__ import annotations

from typing import Any

import yaml

from pedl.config.yaml12 import Yaml12Loader, dump


class OverrideError(ValueError):
    """An override that cannot apply; the message names it."""


def apply_overrides(config_yaml: str, overrides: list[str]) -> str:
    """The config with every override applied in order, as YAML (comments do not survive)."""
    try:
        raw = yaml.load(config_yaml, Loader=Yaml12Loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError:
        return config_yaml  # the config's own parse reports it with its line
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return config_yaml
    for override in overrides:
        _apply(raw, override)
    return dump(raw)


def _apply(raw: dict[str, Any], override: str) -> None:
    key, sep, text = override.partition("=")
    path = key.strip().split(".")
    if not sep or not all(part.strip() for part in path):
        raise OverrideError(f"--config {override!r}: expected KEY=VALUE, e.g. searcher.max_trials=4")
    try:
        value = yaml.load(text, Loader=Yaml12Loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise OverrideError(f"--config {override!r}: the value is not valid YAML ({problem})") from None
    section = raw
    for depth, part in enumerate(path[:-1]):
        child = section.setdefault(part, {})
        if child is None:
            child = section[part] = {}
        if not isinstance(child, dict):
            where = ".".join(path[: depth + 1])
            raise OverrideError(f"--config {override!r}: {where} is a {type(child).__name__}, not a section")
        section = child
    section[path[-1]] = value
