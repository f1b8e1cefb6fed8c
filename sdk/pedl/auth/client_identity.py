"""The identity a client sends with a login (`pedl-client` metadata), so the scheduler's login
limits tell apart clients that share an address: the CLI, trials and the web UI all come from
127.0.0.1 on a local cluster, and many users share a NAT or proxy. It is no credential (a client
may send anything); it only keeps one client's wrong passwords from holding up another's logins.
"""

from __future__ import annotations

import os
import secrets

METADATA_KEY = "pedl-client"
MAX_LENGTH = 80
_PROCESS = secrets.token_hex(6)  # one per process: a CLI command, a script, a notebook


def identity(kind: str = "cli") -> str:
    """`trial-<id>` inside a trial (the agent sets PEDL_TRIAL_ID), else `<kind>-<random per process>`."""
    trial = os.environ.get("PEDL_TRIAL_ID")
    if trial:
        return f"trial-{trial}"
    return f"{kind}-{_PROCESS}"


def metadata(value: str | None = None) -> tuple[tuple[str, str]]:
    return ((METADATA_KEY, value or identity()),)


def received(pairs: object) -> str:
    """The identity a call carried (printable, at most MAX_LENGTH characters), or ""."""
    for key, value in pairs or ():  # type: ignore[attr-defined]
        if key.lower() == METADATA_KEY and isinstance(value, str):
            return "".join(c for c in value if c.isprintable())[:MAX_LENGTH]
    return ""
