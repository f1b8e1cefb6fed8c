"""What a username may be: Determined 0.38.1's rules, so every name a Determined user has (and
those its e2e tests make, such as `rename-user-$64`) is one pedl accepts.

Every path that names a user (gRPC, Determined's REST API, `pedl user`, the web UI) reaches
`Users`, which calls `clean_username`: one rule for all of them. As Determined's master does,
surrounding whitespace is dropped, the rest is printable ASCII (letters, digits, punctuation,
inner spaces) of at least two characters, only an admin may be called "admin" (in any case) and
nobody may become "determined" but the user of that name. pedl adds two bounds Determined lacks:
no tabs or line breaks inside (they break tables and logs), and at most 255 characters.
"""

from __future__ import annotations

MIN_CHARS = 2
MAX_CHARS = 255
_PRINTABLE_ASCII = frozenset(chr(c) for c in range(0x20, 0x7F))


class InvalidUsername(ValueError):
    """A username Determined's rules (and pedl's bounds) refuse; the message says why."""


def clean_username(name: str, *, current: str, admin: bool) -> str:
    """`name` without surrounding whitespace, or InvalidUsername naming what is wrong.

    `current`: the user's name now (for a new user, the name asked for), `admin`: whether that
    user is (or is being created as) an admin."""
    clean = name.strip()
    bad = sorted({c for c in clean if c not in _PRINTABLE_ASCII})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise InvalidUsername(
            f"invalid username {name!r}: only printable ASCII characters and inner spaces are allowed "
            f"(not {shown})"
        )
    if not MIN_CHARS <= len(clean) <= MAX_CHARS:
        raise InvalidUsername(
            f"invalid username {name!r}: it must have {MIN_CHARS} to {MAX_CHARS} characters "
            "(surrounding spaces do not count)"
        )
    if clean.lower() == "admin" and not admin:
        raise InvalidUsername(f"invalid username {name!r}: only an admin may be called 'admin'")
    if clean.lower() == "determined" and current != "determined":
        raise InvalidUsername(f"invalid username {name!r}: no user may become 'determined'")
    return clean
