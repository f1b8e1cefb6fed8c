"""A PyYAML loader that reads scalars as YAML 1.2 does, like Determined's CLI (ruamel.yaml, YAML 1.2).

YAML 1.1 (PyYAML's default) reads `no`/`on`/`yes` as booleans, `1e-5` as a string and `010` as
octal; YAML 1.2's core schema reads `no` as a string, `1e-5` as a number and `010` as ten. Only
`true`/`false` (three capitalizations each) are booleans, and `~`, `null` or nothing are null.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from pedl.config.yaml_bounds import BoundedComposer

_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_NULL = "tag:yaml.org,2002:null"

_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)


class Yaml12Loader(BoundedComposer, yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars; timestamps stay as PyYAML reads them. Bounded
    (yaml_bounds): a document too deep or with aliases expanding too far raises YamlLimitError."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_BOOL, _INT, _FLOAT, _NULL)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(_BOOL, _BOOL_RE, list("tTfF"))
Yaml12Loader.add_implicit_resolver(_NULL, _NULL_RE, ["~", "n", "N", ""])
Yaml12Loader.add_implicit_resolver(_INT, _INT_RE, list("-+0123456789"))
Yaml12Loader.add_implicit_resolver(_FLOAT, _FLOAT_RE, list("-+.0123456789"))


def _bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    return loader.construct_scalar(node).lower() == "true"


def _int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


def _float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    if text.endswith(".inf"):
        return -math.inf if text.startswith("-") else math.inf
    if text == ".nan":
        return math.nan
    return float(text)


def _null(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    return None


Yaml12Loader.add_constructor(_BOOL, _bool)
Yaml12Loader.add_constructor(_INT, _int)
Yaml12Loader.add_constructor(_FLOAT, _float)
Yaml12Loader.add_constructor(_NULL, _null)


class SafeQuotingDumper(yaml.SafeDumper):
    """Quotes every string that YAML 1.1 or 1.2 would read as something else (`no`, `1e-5`, `010`),
    so the YAML pedl writes reads back the same under either (this loader, PyYAML, ruamel)."""


SafeQuotingDumper.yaml_implicit_resolvers = {
    first: list(yaml.SafeDumper.yaml_implicit_resolvers.get(first, []))
    + list(Yaml12Loader.yaml_implicit_resolvers.get(first, []))
    for first in set(yaml.SafeDumper.yaml_implicit_resolvers) | set(Yaml12Loader.yaml_implicit_resolvers)
}


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=SafeQuotingDumper, sort_keys=False, default_flow_style=False)
