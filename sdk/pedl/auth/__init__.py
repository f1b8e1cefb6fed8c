"""The client side of authentication: what a CLI or SDK user (and a service acting as a client) needs.

- `pedl.auth.login`: exchange a password for a session token (`pedl user login`).
- `pedl.auth.token_store`: `$PEDL_HOME/auth.json`, the saved logins.
- `pedl.auth.credentials`: which token and CA a channel to an address presents, cluster secrets.
- `pedl.auth.bearer`: the channel interceptors that add `authorization: Bearer <token>`.

Checking tokens, trial tokens and who may do what are the servers' business: they live in
`pedl_server_auth` (services/server_auth/), which a Trial never imports.
"""

from pedl.auth.credentials import (
    ENV_CLUSTER_SECRET,
    ENV_TLS_CA,
    ENV_TOKEN,
    MIN_SECRET_CHARS,
    cluster_secret,
    configure_process,
    credential_for,
    read_pem,
    read_secret_file,
    tls_ca,
)
from pedl.auth.errors import AuthConfigError
from pedl.auth.token_store import auth_file, forget_login, load_logins, save_login

__all__ = [
    "ENV_CLUSTER_SECRET",
    "ENV_TLS_CA",
    "ENV_TOKEN",
    "MIN_SECRET_CHARS",
    "AuthConfigError",
    "auth_file",
    "cluster_secret",
    "configure_process",
    "credential_for",
    "forget_login",
    "load_logins",
    "read_pem",
    "read_secret_file",
    "save_login",
    "tls_ca",
]
