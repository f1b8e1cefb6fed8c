"""The `entrypoint` field: where the harness finds the user's code.

Forms, decided by shape:
- `"<module>:<object reference>"` (no spaces) -> a Trial class, e.g. `model_def:MyTrial`, `:MyTrial`.
- `"train.py"` (one word, no colon) -> a Simple Model Definition script, run without arguments.
- `{script: train.py, args: [...]}` -> the PEDL Simple Model Definition section.
- `"python3 train.py --x 1"` or a list of strings -> a command (Determined's Core API form). As
  Determined's launch runs them, a string is run by `sh -c` (so `exit 99`, pipes and `&&` work) and
  a list is executed as it is.
- `"python3 -m determined.launch.torch_distributed --trial model_def:MyTrial"` (or horovod's) -> the
  Trial class it launches; launchers pedl does not offer are refused (`pedl.config.launchers`).
Absent -> None: the model definition package itself exposes the Trial (old PEDL standard form).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Literal

from pedl.config._checks import check_keys, describe, expect_list, expect_str
from pedl.config.errors import FieldError, FieldPath
from pedl.config.launchers import trial_reference

EntrypointKind = Literal["trial", "script", "command"]


@dataclass(frozen=True)
class Entrypoint:
    kind: EntrypointKind
    module: str = ""
    object_ref: str = ""
    script: str = ""
    args: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    # A command written as a string: the text `sh -c` runs (`command` is its words, for reading it).
    shell: str = ""

    def __str__(self) -> str:
        if self.kind == "trial":
            return f"{self.module}:{self.object_ref}"
        if self.kind == "script":
            return " ".join((self.script, *self.args))
        return self.shell or " ".join(self.command)


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
        return _command(tuple(value), path)
    text = expect_str(value, path, non_empty=True).strip()
    if any(ch.isspace() for ch in text):
        try:
            command = tuple(shlex.split(text))
        except ValueError as e:
            raise FieldError(path, f"cannot split command {describe(text)}: {e}") from None
        return _command(command, path, shell=text)
    return _single_word(text, path)


def _command(command: tuple[str, ...], path: FieldPath, shell: str = "") -> Entrypoint:
    ref = trial_reference(command, path)
    if ref is None:
        return Entrypoint(kind="command", command=command, shell=shell)
    spec = _single_word(ref, path)
    if spec.kind != "trial":
        raise FieldError(path, f"'--trial' expects '<module>:<object reference>', got {describe(ref)}")
    return spec


def _single_word(text: str, path: FieldPath) -> Entrypoint:
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
    return Entrypoint(kind="command", command=(text,), shell=text)


def _script_section(section: dict[str, Any], path: FieldPath) -> Entrypoint:
    check_keys(section, path, ("script", "args"), required=("script",))
    script = expect_str(section["script"], (*path, "script"), non_empty=True)
    args = section.get("args") or []
    for i, arg in enumerate(expect_list(args, (*path, "args"))):
        if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
            raise FieldError((*path, "args", i), f"expected a string or number, got {describe(arg)}")
    return Entrypoint(kind="script", script=script, args=tuple(str(a) for a in args))


# PEDL 0.11's form: one mapping naming the trial class and the data functions.
ENTRYPOINTS_FIELDS = ("trial_class", "data_loaders_function", "download_data_function")


def parse_entrypoints(value: Any, path: FieldPath = ("entrypoints",)) -> dict[str, Entrypoint]:
    """`entrypoints: {trial_class: model_def:MyTrial, data_loaders_function: data:make_data_loaders,
    download_data_function: data:download_data}`, each '<module>:<object reference>'."""
    if not isinstance(value, dict):
        raise FieldError(
            path, f"expected a mapping with {', '.join(ENTRYPOINTS_FIELDS)}, got {describe(value)}"
        )
    check_keys(value, path, ENTRYPOINTS_FIELDS, required=("trial_class",))
    parsed: dict[str, Entrypoint] = {}
    for key, text in value.items():
        if text is None and key != "trial_class":
            continue
        spec = parse_entrypoint(text, (*path, key))
        if spec is None or spec.kind != "trial":
            raise FieldError(
                (*path, key),
                f"expected '<module>:<name>' like 'data:make_data_loaders', got {describe(text)}",
            )
        parsed[key] = spec
    return parsed


def parse_config_entrypoint(raw: dict[str, Any]) -> Entrypoint | None:
    """The config's entrypoint in either generation's form; a config using both is refused."""
    if "entrypoints" in raw and raw["entrypoints"] is not None:
        if raw.get("entrypoint") is not None:
            raise FieldError(
                ("entrypoints",),
                "cannot be combined with entrypoint: 'entrypoints' is PEDL 0.11's form (trial_class, "
                "data_loaders_function, download_data_function), 'entrypoint' the seed's and Determined's; "
                "keep one",
            )
        return parse_entrypoints(raw["entrypoints"])["trial_class"]
    return parse_entrypoint(raw.get("entrypoint"))
