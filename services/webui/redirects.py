"""Where the login page may send the browser afterwards: only a path on this site.

`next` comes from the address bar, so anyone can write it into a link. Browsers read a backslash
as a slash and drop tabs and newlines from URLs, so `/\\evil.example/` (or `/%5Cevil.example/`,
which the page's query decoding turns into it) and `/\\t/evil.example` leave the site like
`//evil.example` does; a scheme (`https:`, `javascript:`) or a relative path is refused too.
The check is a pure function so that any server of the web UI calls the same one.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

DEFAULT = "/experiments"


def safe_next(value: object, default: str = DEFAULT) -> str:
    """`value` when it is a path on this origin (`/experiments/3?x=1`), else `default`."""
    if not isinstance(value, str) or not value.startswith("/") or len(value) > 2048:
        return default
    decoded = value
    for _ in range(3):  # however many times something on the way decodes it
        decoded = unquote(decoded)
    for text in (value, decoded):
        if "\\" in text or text.startswith("//") or any(c < " " or c == "\x7f" for c in text):
            return default
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return default
    return value
