"""The `entrypoint` config field: `<module>:<object reference>` (seeds 001/004)."""

from __future__ import annotations

from dataclasses import dataclass

from pedl.model_def.errors import ModelDefinitionError


@dataclass(frozen=True)
class Entrypoint:
    # Dotted module relative to the model definition root; "" for the top-level __init__.py.
    module: str
    # Dotted attribute path inside that module, e.g. "trial_classes.NestedTrial".
    object_ref: str

    def __str__(self) -> str:
        return f"{self.module}:{self.object_ref}"


def _check_dotted(value: str, what: str, entrypoint: str) -> None:
    for part in value.split("."):
        if not part.isidentifier():
            raise ModelDefinitionError(
                f"entrypoint {entrypoint!r}: {what} {value!r} is not a dotted Python name "
                "(expected '<module>:<object reference>', e.g. 'model_def:MyTrial' or ':MyTrial')"
            )


def parse_entrypoint(entrypoint: str) -> Entrypoint:
    text = entrypoint.strip()
    if text.count(":") != 1:
        raise ModelDefinitionError(
            f"entrypoint {entrypoint!r} must have the form '<module>:<object reference>' with exactly "
            "one ':' (e.g. 'model_def:MyTrial', or ':MyTrial' for a class in __init__.py)"
        )
    module, object_ref = (part.strip() for part in text.split(":"))
    if module:
        _check_dotted(module, "module", entrypoint)
    if not object_ref:
        raise ModelDefinitionError(f"entrypoint {entrypoint!r} names no object after ':'")
    _check_dotted(object_ref, "object reference", entrypoint)
    return Entrypoint(module, object_ref)
