"""Turn a config source (path, YAML text, dict) into data plus a field-path -> line map.

Lines come from composing the YAML node tree, so errors can say where a field was written.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from pedl.config.errors import ConfigError, FieldPath, format_path
from pedl.config.yaml12 import Yaml12Loader
from pedl.config.yaml_bounds import YamlLimitError


@dataclass
class Source:
    data: Any
    filename: str | None = None
    lines: dict[FieldPath, int] = field(default_factory=dict)

    def line_for(self, path: FieldPath) -> int | None:
        """The line of `path`, or of its nearest ancestor written in the YAML (e.g. for a missing field)."""
        for n in range(len(path), -1, -1):
            line = self.lines.get(path[:n])
            if line is not None:
                return line
        return None


def load_source(source: Any, filename: str | None) -> Source:
    if isinstance(source, dict):
        return Source(data=source, filename=filename)
    if isinstance(source, os.PathLike):
        return _load_file(os.fspath(source), filename)
    if isinstance(source, bytes):
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(f"config is not UTF-8 text: {e}", filename=filename) from None
        return _load_yaml(text, filename)
    if isinstance(source, str):
        if "\n" not in source and source.strip() and os.path.isfile(source):
            return _load_file(source, filename)
        if "\n" not in source and source.strip().lower().endswith((".yaml", ".yml", ".json")):
            raise ConfigError(f"config file not found: {source}", filename=filename)
        return _load_yaml(source, filename)
    raise ConfigError(
        f"config source must be a path, YAML text or a mapping, got {type(source).__name__}",
        filename=filename,
    )


def _load_file(path: str, filename: str | None) -> Source:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read config file: {e.strerror or e}", filename=filename or path) from None
    return load_source(raw, filename or path)


def _load_yaml(text: str, filename: str | None) -> Source:
    loader = Yaml12Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ConfigError("config is empty; expected a mapping of experiment settings", filename=filename)
        data = loader.construct_object(node, deep=True)
        lines: dict[FieldPath, int] = {}
        _record_lines(node, (), loader.constructed_objects, lines, filename)
    except YamlLimitError as e:
        mark = e.problem_mark
        raise ConfigError(
            f"config refused: {e.problem} (see pedl.config.yaml_bounds)",
            line=mark.line + 1 if mark else None,
            filename=filename,
        ) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        message = " ".join(str(p) for p in (e.context, e.problem) if p) or str(e)
        raise ConfigError(
            f"not valid YAML: {message}", line=mark.line + 1 if mark else None, filename=filename
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"not valid YAML: {e}", filename=filename) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ConfigError(
            f"the top level of the config must be a mapping, got {_kind(data)}",
            line=node.start_mark.line + 1,
            filename=filename,
        )
    return Source(data=_plain(data), filename=filename, lines=lines)


def _record_lines(
    node: yaml.Node, path: FieldPath, objects: dict, lines: dict[FieldPath, int], filename: str | None
) -> None:
    """Also refuses a key written twice in one mapping (YAML 1.2 forbids it; PyYAML keeps the last)."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = objects.get(key_node)
            if key is None or not isinstance(key, (str, int, float, bool)):
                continue
            # A path names a float key by its text (paths hold field names and list indices).
            child = (*path, key if isinstance(key, (str, int)) else str(key))
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(
                    f"duplicate key {key!r} (first on line {seen[key]}, again on line {line}); "
                    "write each field once",
                    path=format_path(child),
                    line=line,
                    filename=filename,
                )
            seen[key] = line
            # The key's line: where the user wrote the field name (a nested mapping starts a line later).
            lines[child] = line
            _record_lines(value_node, child, objects, lines, filename)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _record_lines(item, (*path, i), objects, lines, filename)


def _plain(value: Any) -> Any:
    """YAML timestamps become ISO strings so the config stays JSON-serializable."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"a {type(value).__name__} ({value!r})"
