"""The server side of authentication and authorisation, shared by the scheduler and the checkpoint store.

A package of its own, not part of `pedl` (the SDK a Trial author installs and every harness
imports): nothing here runs in a user's process, and a trial never sees how tokens are checked or
minted.

- `principal`: who is calling (`Principal`, `current_principal()`) and `Denied`.
- `interceptor`: the grpc.aio interceptor that reads the bearer token and establishes the caller.
- `trial_token`: per-trial-run tokens the scheduler mints and the store checks.
- `authz`: may this identity do this to that object, for every RPC of both services.

The client side (login, the token store, bearer channel interceptors) is `pedl.auth`.
"""

from pedl_server_auth.interceptor import AuthInterceptor, bearer_token, is_secret
from pedl_server_auth.principal import ANONYMOUS, CLUSTER, Denied, Principal, current_principal

__all__ = [
    "ANONYMOUS",
    "CLUSTER",
    "AuthInterceptor",
    "Denied",
    "Principal",
    "bearer_token",
    "current_principal",
    "is_secret",
]
