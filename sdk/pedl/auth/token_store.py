"""The token store: `$PEDL_HOME/auth.json`, one login per master address, readable by its owner only.

Each entry holds the username, the session token, its expiry and the cluster's checkpoint store
address (so the token is presented there too).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pedl.auth.errors import AuthConfigError


def auth_file() -> Path:
    from pedl.cluster.paths import pedl_home  # lazily: pedl.cluster imports pedl._grpc

    return pedl_home() / "auth.json"


def load_logins(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Master address -> {username, token, checkpoint_store, expires_at}; empty when none."""
    path = path or auth_file()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise AuthConfigError(f"cannot read {path}: {e}") from e
    masters = data.get("masters") if isinstance(data, dict) else None
    return masters if isinstance(masters, dict) else {}


def _write_private(path: Path, text: str) -> None:
    """Atomically, and readable by the owner only from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    import tempfile  # here: a command that only reads its token skips tempfile's start cost

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_login(master: str, entry: dict[str, Any], path: Path | None = None) -> Path:
    path = path or auth_file()
    logins = load_logins(path)
    logins[master] = entry
    _write_private(path, json.dumps({"masters": logins}, indent=2) + "\n")
    return path


def forget_login(master: str, path: Path | None = None) -> dict[str, Any] | None:
    """Removes the login for `master`; returns it (None if there was none)."""
    path = path or auth_file()
    logins = load_logins(path)
    entry = logins.pop(master, None)
    if entry is not None:
        _write_private(path, json.dumps({"masters": logins}, indent=2) + "\n")
    return entry
