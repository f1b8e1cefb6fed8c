"""Determined image names mapped to the Python environments agents offer.

A Determined config names the container its trials ran in (`environment.image`, e.g.
`determinedai/environments:py-3.8-pytorch-1.12-tf-2.8-cpu-...`); pedl starts no containers, so a
scheduler started with `--image-environment PATTERN=NAME` (shell-style patterns, first match wins)
runs such a config, unchanged, in the agents' environment NAME: the libraries of the release it was
written for. A config that names its environment (`environment: NAME`, `environment.name`) keeps it;
one whose image matches no pattern runs in the default environment, warned that the image is not pulled.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pedl.config.experiment import ExperimentConfig

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_IMAGE_WARNING = "environment.image:"


@dataclass(frozen=True)
class ImageRule:
    pattern: str  # fnmatch-style, matched against the whole image name
    environment: str  # the agents' environment name (`pedl-agent --environment NAME=PYTHON`)

    def matches(self, image: str) -> bool:
        return fnmatch.fnmatchcase(image, self.pattern)


def parse_image_rules(values: list[str]) -> tuple[ImageRule, ...]:
    """`PATTERN=NAME` items in order; ValueError naming the first bad one."""
    rules = []
    for value in values:
        pattern, sep, name = value.rpartition("=")
        if not sep or not pattern or not name:
            raise ValueError(f"--image-environment must be PATTERN=NAME, got {value!r}")
        if not _NAME.match(name):
            raise ValueError(
                f"--image-environment {value!r}: environment name {name!r} may hold only letters, "
                "digits, '.', '_' and '-'"
            )
        rules.append(ImageRule(pattern, name))
    return tuple(rules)


def rule_for(rules: tuple[ImageRule, ...], images: tuple[str, ...]) -> tuple[ImageRule, str] | None:
    """The first rule matching one of the config's images (per device type: the CPU one first),
    with the image it matched."""
    return next(((r, image) for image in images for r in rules if r.matches(image)), None)


def resolve(config: ExperimentConfig, rules: tuple[ImageRule, ...]) -> ExperimentConfig:
    """The config with its environment named by the rule its image matches (and its warning that the
    image is not pulled replaced by one naming that environment); the config itself when it names
    its environment, names no image, or matches no rule."""
    environment = config.environment
    found = None if environment.name else rule_for(rules, environment.images)
    if found is None:
        return config
    rule, image = found
    note = (
        f"environment.image: {image!r} runs in the agents' Python environment "
        f"{rule.environment!r} (the scheduler's --image-environment {rule.pattern}={rule.environment})"
    )
    warnings = tuple(w for w in config.warnings if not w.startswith(_IMAGE_WARNING))
    return dataclasses.replace(
        config,
        environment=dataclasses.replace(environment, name=rule.environment),
        warnings=(*warnings, note),
    )
