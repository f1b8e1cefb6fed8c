"""`det master config`: the scheduler's effective settings as its operator gave them, secrets left out.

Built once at start from the parsed command line (flags and PEDL_SCHEDULER_* values alike), so what
it shows is what the process runs with, not what a config file on disk says now.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from pedl.config.masking import mask_text

# Flags whose values are credentials or name where credentials live: shown as set or not, never read.
_SECRET_FLAGS = frozenset({"cluster_secret_file", "admin_password_file", "tls_key"})


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """Flag name (dashes as the command line writes it) -> a JSON-able value."""
    out: dict[str, Any] = {}
    for name, value in sorted(vars(args).items()):
        key = name.replace("_", "-")
        if name in _SECRET_FLAGS:
            out[key] = "(set)" if value else None
        else:
            out[key] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, (str, Path)):
        return mask_text(str(value))  # a database URL's password, a token in a query
    return mask_text(repr(value))
