"""Which credential and CA a pedl process presents to which address: the one place clients look.

Users log in with `pedl user login`; the token lands in `$PEDL_HOME/auth.json` (mode 0600), keyed
by master address and remembering that cluster's checkpoint store, so every channel pedl._grpc
makes to either picks it up. Services (scheduler, store, agent) present the cluster secret instead.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

ENV_TOKEN = "PEDL_TOKEN"
ENV_CLUSTER_SECRET = "PEDL_CLUSTER_SECRET"
ENV_TLS_CA = "PEDL_TLS_CA"
MIN_SECRET_CHARS = 16

_process_credential: str | None = None
_process_tls_ca: str | None = None


class AuthConfigError(ValueError):
    """A secret, token or certificate file that cannot be used."""


def configure_process(credential: str | None = None, tls_ca: str | None = None) -> None:
    """Services call this at start-up: their channels then carry `credential` and trust `tls_ca`."""
    global _process_credential, _process_tls_ca
    _process_credential = credential or None
    _process_tls_ca = tls_ca or None


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


def credential_for(address: str) -> str | None:
    """The service's own credential, else $PEDL_TOKEN, else the login for this master (or its
    checkpoint store) in auth.json, else $PEDL_CLUSTER_SECRET (operators' scripts)."""
    if _process_credential:
        return _process_credential
    token = os.environ.get(ENV_TOKEN)
    if token:
        return token
    try:
        logins = load_logins()
    except AuthConfigError:
        logins = {}
    for master, entry in logins.items():
        if address in (master, entry.get("checkpoint_store")) and entry.get("token"):
            return str(entry["token"])
    return os.environ.get(ENV_CLUSTER_SECRET) or None


def tls_ca() -> str | None:
    """Path of the CA bundle clients verify servers with; None means plaintext."""
    return _process_tls_ca or os.environ.get(ENV_TLS_CA) or None


def read_secret_file(path: str | os.PathLike[str], what: str = "cluster secret") -> str:
    try:
        secret = Path(path).read_text().strip()
    except OSError as e:
        raise AuthConfigError(f"cannot read the {what} file {path}: {e.strerror or e}") from e
    if len(secret) < MIN_SECRET_CHARS:
        raise AuthConfigError(f"the {what} in {path} is shorter than {MIN_SECRET_CHARS} characters")
    return secret


def cluster_secret(secret_file: str | None, environ: dict[str, str] | None = None) -> str | None:
    """--cluster-secret-file, else $PEDL_CLUSTER_SECRET; None when neither is given."""
    if secret_file:
        return read_secret_file(secret_file)
    secret = (os.environ if environ is None else environ).get(ENV_CLUSTER_SECRET, "").strip()
    if secret and len(secret) < MIN_SECRET_CHARS:
        raise AuthConfigError(f"{ENV_CLUSTER_SECRET} is shorter than {MIN_SECRET_CHARS} characters")
    return secret or None


def read_pem(path: str | os.PathLike[str], what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise AuthConfigError(f"cannot read the {what} {path}: {e.strerror or e}") from e
    if b"-----BEGIN" not in data:
        raise AuthConfigError(f"the {what} {path} is not a PEM file")
    return data
