"""Config errors that point at the offending field and, for YAML input, its line."""

from __future__ import annotations

PathPart = str | int
FieldPath = tuple[PathPart, ...]


def format_path(path: FieldPath) -> str:
    """`('searcher', 'max_length', 'batches')` -> `searcher.max_length.batches`; ints become `[i]`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class FieldError(ValueError):
    """Raised by validators; carries the field path so the caller can attach the YAML line."""

    def __init__(self, path: FieldPath, message: str) -> None:
        super().__init__(f"{format_path(path)}: {message}" if path else message)
        self.path = path
        self.message = message


class ConfigError(ValueError):
    """An invalid experiment config: `path` names the field, `line` (1-based) locates it in YAML."""

    def __init__(
        self, message: str, *, path: str = "", line: int | None = None, filename: str | None = None
    ) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.filename = filename
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.filename:
            where.append(self.filename)
        if self.line is not None:
            where.append(f"line {self.line}")
        prefix = ", ".join(where)
        body = f"{self.path}: {self.message}" if self.path else self.message
        return f"{prefix}: {body}" if prefix else body
