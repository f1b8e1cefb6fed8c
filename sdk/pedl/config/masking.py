"""Hide secrets before a config is shown to people (CLI output, web UI, logs)."""

from __future__ import annotations

import functools
import re
from typing import Any

MASK = "********"
_SECRET_WORDS = {"password", "passwd", "token", "secret", "credential", "credentials"}
_SECRET_NAMES = {"access_key", "secret_key", "api_key", "private_key", "connection_string", "auth"}


def _words(key: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """By whole words, so `max_tokens` or `tokenizer` stay visible while `auth_token` is hidden.

    Cached: listing a page of experiments asks this of the same few config keys thousands of times."""
    words = _words(key)
    if "_".join(words) in _SECRET_NAMES:
        return True
    return any(w in _SECRET_WORDS for w in words) or "_".join(words[-2:]) in _SECRET_NAMES


def mask_secrets(value: Any) -> Any:
    """A copy with secret-named keys (and NAME=value strings with a secret NAME) replaced by MASK."""
    if isinstance(value, dict):
        return {
            k: (MASK if isinstance(k, str) and is_secret_key(k) and v is not None else mask_secrets(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    if isinstance(value, str) and "=" in value:
        name, _, _ = value.partition("=")
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and is_secret_key(name):
            return f"{name}={MASK}"
    return value
