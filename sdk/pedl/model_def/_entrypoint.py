"""The loader's view of the `entrypoint` field: the config's own parser, with loader errors.

`pedl.config.entrypoint` is the one parser of the field (seeds 001/004); the loader accepts
only its `<module>:<object reference>` form.
"""

from __future__ import annotations

from pedl.config.entrypoint import Entrypoint
from pedl.config.entrypoint import parse_entrypoint as parse_config_entrypoint
from pedl.config.errors import FieldError
from pedl.model_def.errors import ModelDefinitionError

__all__ = ["Entrypoint", "parse_entrypoint"]


def parse_entrypoint(entrypoint: str) -> Entrypoint:
    try:
        parsed = parse_config_entrypoint(entrypoint)
    except FieldError as e:
        raise ModelDefinitionError(f"entrypoint {entrypoint!r}: {e.message}") from None
    if parsed is None or parsed.kind != "trial":
        raise ModelDefinitionError(
            f"entrypoint {entrypoint!r} must have the form '<module>:<object reference>' "
            "(e.g. 'model_def:MyTrial', or ':MyTrial' for a class in __init__.py)"
        )
    return parsed
