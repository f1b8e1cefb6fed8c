"""Which credential and CA a pedl process presents to which address: the one place clients look.

Users log in with `pedl user login` (pedl.auth.login); the token lands in the token store
(pedl.auth.token_store), keyed by master address and remembering that cluster's checkpoint store,
so every channel pedl._grpc makes to either picks it up. Services (scheduler, store, agent) present
the cluster secret instead, read here from its file or the environment.
"""

from __future__ import annotations

import os
from pathlib import Path

from pedl.auth.errors import AuthConfigError
from pedl.auth.token_store import load_logins

ENV_TOKEN = "PEDL_TOKEN"
ENV_CLUSTER_SECRET = "PEDL_CLUSTER_SECRET"
ENV_TLS_CA = "PEDL_TLS_CA"
MIN_SECRET_CHARS = 16

_process_credential: str | None = None
_process_tls_ca: str | None = None


def configure_process(credential: str | None = None, tls_ca: str | None = None) -> None:
    """Services call this at start-up: their channels then carry `credential` and trust `tls_ca`."""
    global _process_credential, _process_tls_ca
    _process_credential = credential or None
    _process_tls_ca = tls_ca or None


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
