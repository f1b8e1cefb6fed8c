"""Bounds on what a YAML document may cost to load, checked before anything is expanded.

A 700-byte document of nested aliases (a "billion laughs") expands to gigabytes once constructed
and walked, and 10,000 nested brackets overflow Python's stack; both are refused here while the
document is still a graph of nodes: nesting depth and alias count while composing, then the size
the document would have with every alias expanded (nodes, and characters of scalars), counted
once per distinct node. Real experiment configs are a few levels deep with a handful of anchors.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_DEPTH = 64  # nested mappings/lists
MAX_ALIASES = 1000  # `*name` references in one document
MAX_EXPANDED_NODES = 100_000  # nodes once every alias is expanded
MAX_EXPANDED_CHARS = 4 * 2**20  # characters of scalars once every alias is expanded


class YamlLimitError(yaml.MarkedYAMLError):
    """A document over one of the bounds above; `problem` says which, `problem_mark` where."""


class BoundedComposer:
    """Mixed into a loader before PyYAML's Scanner and Composer: counts depth while scanning and
    composing, and aliases, then measures the expanded size of the document before construction."""

    _depth = 0
    _aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        loader: Any = self
        if loader.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                mark = loader.peek_event().start_mark
                raise YamlLimitError(problem=f"more than {MAX_ALIASES} aliases (*name)", problem_mark=mark)
        elif self._depth >= MAX_DEPTH:
            mark = loader.peek_event().start_mark
            raise YamlLimitError(problem=f"nested more than {MAX_DEPTH} levels deep", problem_mark=mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self._depth -= 1

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        """Flow nesting (`[[[...`) refused while scanning: the scanner's work per token grows with it."""
        scanner: Any = self
        if scanner.flow_level >= MAX_DEPTH:
            mark = scanner.get_mark()
            raise YamlLimitError(problem=f"nested more than {MAX_DEPTH} levels deep", problem_mark=mark)
        super().fetch_flow_collection_start(token_class)  # type: ignore[misc]

    def get_single_node(self) -> Any:
        node = super().get_single_node()  # type: ignore[misc]
        if node is not None:
            check_expanded_size(node)
        return node


def check_expanded_size(root: yaml.Node) -> None:
    """Raises YamlLimitError when `root` with its aliases expanded would be over the bounds.

    Each distinct node is measured once (aliases share nodes), so this costs the size of the
    document as written, not as expanded."""
    measured: dict[int, tuple[int, int]] = {}

    def size(node: yaml.Node) -> tuple[int, int]:
        known = measured.get(id(node))
        if known is not None:
            return known
        nodes, chars = 1, 0
        if isinstance(node, yaml.ScalarNode):
            chars = len(node.value)
        else:
            children = (
                node.value if isinstance(node, yaml.SequenceNode) else [n for kv in node.value for n in kv]
            )
            for child in children:
                n, c = size(child)
                nodes, chars = nodes + n, chars + c
        if nodes > MAX_EXPANDED_NODES or chars > MAX_EXPANDED_CHARS:
            raise YamlLimitError(
                problem=f"with its aliases expanded it would hold over {MAX_EXPANDED_NODES:,} values "
                f"or {MAX_EXPANDED_CHARS // 2**20} MiB of text",
                problem_mark=node.start_mark,
            )
        measured[id(node)] = (nodes, chars)
        return nodes, chars

    size(root)


class BoundedSafeLoader(BoundedComposer, yaml.SafeLoader):
    """PyYAML's SafeLoader (YAML 1.1 scalars) with the bounds above."""


def safe_load(text: str) -> Any:
    """`yaml.safe_load`, bounded: raises YamlLimitError (a yaml.YAMLError) past the bounds."""
    return yaml.load(text, Loader=BoundedSafeLoader)  # noqa: S506 - a SafeLoader
