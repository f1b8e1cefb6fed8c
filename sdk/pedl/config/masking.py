"""Hide secrets before a config or a log line is shown to people (CLI output, web UI, logs, JSON API).

The one place that decides what looks secret: values under secret-named keys, `NAME=value` with a
secret NAME (environment variables), passwords in URLs (`scheme://user:password@host`) and URL query
parameters named like a token, key, secret, signature or password. Every reader (the scheduler's
stored configs and trial logs, the CLI, the web UI) calls `mask_secrets` or `mask_text` from here.
"""

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


# Query parameters need a wider net than config keys: `key`, `sig` and AWS's `X-Amz-Signature`.
_QUERY_WORDS = _SECRET_WORDS | {"key", "signature", "sig", "apikey", "pwd", "pass"}
# scheme://user:password@host: the password runs up to the last '@' before the path.
_URL_CREDENTIALS = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)(?P<secret>[^\s/?#]+)(?=@)")
_QUERY_PARAM = re.compile(r"(?P<head>[?&;](?P<name>[A-Za-z0-9_.\-]+)=)(?P<value>[^&#\s\"'<>]+)")
# NAME=value or NAME: value inside free text, e.g. `export AWS_SECRET_ACCESS_KEY=...` in a log line,
# and quoted names as JSON or a printed dict (`os.environ`) writes them: 'NAME': 'value'.
_ASSIGNMENT = re.compile(
    r"(?P<head>(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z_][A-Za-z0-9_]*)[\"']?(?:=|: ?)[\"']?)"
    r"(?P<value>[^\s\"',;&]+)"
)


# Every secret word, query word and name above contains one of these.
_HINTS = ("pass", "pwd", "token", "secret", "credential", "key", "sig", "auth", "connection_string")


def is_secret_query_param(name: str) -> bool:
    words = _words(name)
    return is_secret_key(name) or any(w in _QUERY_WORDS for w in words)


def mask_text(text: str) -> str:
    """`text` with URL passwords, secret query parameters and secret NAME=value assignments masked."""
    lowered = text.lower()
    if "://" not in text and not any(hint in lowered for hint in _HINTS):
        return text  # most log lines: a few substring scans, no regex
    text = _URL_CREDENTIALS.sub(lambda m: m["head"] + MASK, text)
    text = _QUERY_PARAM.sub(
        lambda m: m["head"] + MASK if is_secret_query_param(m["name"]) and m["value"] != MASK else m[0], text
    )
    return _ASSIGNMENT.sub(
        lambda m: m["head"] + MASK if is_secret_key(m["name"]) and m["value"] != MASK else m[0], text
    )


def mask_secrets(value: Any) -> Any:
    """A copy with secret-named keys replaced by MASK, and every string passed through `mask_text`."""
    if isinstance(value, dict):
        return {
            k: (MASK if isinstance(k, str) and is_secret_key(k) and v is not None else mask_secrets(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    if isinstance(value, str):
        name, eq, _ = value.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and is_secret_key(name):
            return f"{name}={MASK}"
        return mask_text(value)
    return value


# Shorter values are left alone in free text: masking every "1" or "abc" in a log hides nothing.
MIN_SECRET_LENGTH = 4


def secret_values(config: Any) -> frozenset[str]:
    """The secret values a config holds (under secret-named keys, in secret NAME=value entries such as
    environment variables, URL passwords and secret query parameters), so that a log line holding one
    verbatim (a trial printing `os.environ` or the token it was given) is masked too."""
    found: set[str] = set()

    def leaves(value: Any) -> None:
        if isinstance(value, dict):  # `type` names a hyperparameter's kind (const), never a secret
            for k, v in value.items():
                if k != "type":
                    leaves(v)
        elif isinstance(value, list):
            for v in value:
                leaves(v)
        elif value is not None and not isinstance(value, bool):
            found.add(str(value))

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                (leaves if isinstance(k, str) and is_secret_key(k) else walk)(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            name, eq, rest = value.partition("=")
            if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and is_secret_key(name):
                found.add(rest)
            found.update(m["secret"] for m in _URL_CREDENTIALS.finditer(value))
            found.update(m["value"] for m in _QUERY_PARAM.finditer(value) if is_secret_query_param(m["name"]))

    walk(config)
    return frozenset(v for v in found if len(v) >= MIN_SECRET_LENGTH and v != MASK)


def mask_values(text: str, values: frozenset[str]) -> str:
    """`text` with each of `values` (from `secret_values`) masked wherever it appears, longest first."""
    for value in sorted((v for v in values if v in text), key=len, reverse=True):
        text = text.replace(value, MASK)
    return text
