"""Where the scheduler is: an explicit address, else $PEDL_MASTER, else the local default."""

from __future__ import annotations

import os

from pedl.client.errors import ClientError

DEFAULT_MASTER = "127.0.0.1:8080"


def resolve_master(explicit: str | None = None, name: str = "master") -> str:
    """HOST:PORT (or unix:PATH) of the scheduler; `name` is how the caller's user spells the
    explicit value (`--master` on the command line), for the error."""
    address = (explicit or os.environ.get("PEDL_MASTER") or DEFAULT_MASTER).strip()
    if address.startswith("unix:"):
        return address
    for scheme in ("grpc://", "http://"):
        address = address.removeprefix(scheme)
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        source = name if explicit else "PEDL_MASTER" if os.environ.get("PEDL_MASTER") else "master"
        raise ClientError(f"{source} must be HOST:PORT, got {address!r}", bad_input=True)
    return address
