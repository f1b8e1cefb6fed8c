"""The `entrypoint` field: where the harness finds the user's code.

Forms, decided by shape:
- `"<module>:<object reference>"` (no spaces) -> a Trial class, e.g. `model_def:MyTrial`, `:MyTrial`.
- `"train.py"` (one word, no colon) -> a Simple Model Definition script, run without arguments.
- `{script: train.py, args: [...]}` -> the PEDL Simple Model Definition section.
- `"python3 train.py --x 1"` or a list of strings -> a command (Determined's Core API form).
Absent -> None: the model definition package itself exposes the Trial (old PEDL standard form).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Literal

from pedl.config._checks import check_keys, describe, expect_list, expect_str
from pedl.config.errors import FieldError, FieldPath

EntrypointKind = Literal["trial", "script", "command"]


@dataclass(frozen=True)
class Entrypoint:
    kind: EntrypointKind
    module: str = ""
    object_ref: str = ""
    script: str = ""
    args: tuple[str, ...] = ()
    command: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "trial":
            return f"{self.module}:{self.object_ref}"
        if self.kind == "script":
            return " ".join((self.script, *self.args))
        return " ".join(self.command)


def _dotted(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def parse_entrypoint(value: Any, path: FieldPath = ("entrypoint",)) -> Entrypoint | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return _script_section(value, path)
    if isinstance(value, list):
        for i, item in enumerate(expect_list(value, path)):
            expect_str(item, (*path, i))
        if not value:
            raise FieldError(path, "must not be an empty list")
        return Entrypoint(kind="command", command=tuple(value))
    text = expect_str(value, path, non_empty=True).strip()
    if any(ch.isspace() for ch in text):
        try:
            return Entrypoint(kind="command", command=tuple(shlex.split(text)))
        except ValueError as e:
            raise FieldError(path, f"cannot split command {describe(text)}: {e}") from None
    if ":" in text:
        module, _, obj = text.partition(":")
        if (module and not _dotted(module)) or not obj or not _dotted(obj):
            raise FieldError(
                path,
                f"expected '<module>:<object reference>' like 'model_def:MyTrial' or ':MyTrial', "
                f"got {describe(text)}",
            )
        return Entrypoint(kind="trial", module=module, object_ref=obj)
    if text.endswith(".py"):
        return Entrypoint(kind="script", script=text)
    return Entrypoint(kind="command", command=(text,))


def _script_section(section: dict[str, Any], path: FieldPath) -> Entrypoint:
    check_keys(section, path, ("script", "args"), required=("script",))
    script = expect_str(section["script"], (*path, "script"), non_empty=True)
    args = section.get("args") or []
    for i, arg in enumerate(expect_list(args, (*path, "args"))):
        if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
            raise FieldError((*path, "args", i), f"expected a string or number, got {describe(arg)}")
    return Entrypoint(kind="script", script=script, args=tuple(str(a) for a in args))
