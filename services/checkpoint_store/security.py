"""Who is calling the checkpoint store: pedl services (cluster secret), trials (the token the
scheduler minted for their run) and users (session tokens, checked with the scheduler and cached).
What each may do to which checkpoint is `authz.py`."""

from __future__ import annotations

import os
import time
from typing import cast

import grpc
import grpc.aio

from pedl import _grpc, auth
from pedl.v1 import auth_pb2, auth_pb2_grpc
from pedl_checkpoint_store.authz import SchedulerAsker, StoreAuthz, principal_for_trial
from pedl_checkpoint_store.config import Config
from pedl_server_auth import CLUSTER, AuthInterceptor, Denied, Principal, is_secret, trial_token

# 0: a deactivated user or a session ended by `logout --all` is refused at once.
CACHE_SECONDS = 0.0
VALIDATE_TIMEOUT_SECONDS = 10.0


class TokenValidator:
    """Asks the scheduler's AuthService.ValidateToken, remembering answers for a few seconds."""

    def __init__(self, master: str, cache_seconds: float = CACHE_SECONDS) -> None:
        self.master = master
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, Principal]] = {}
        self._channel: grpc.aio.Channel | None = None

    async def validate(self, token: str) -> Principal:
        now = time.monotonic()
        hit = self._cache.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        if not self.master:
            raise Denied(
                grpc.StatusCode.UNAUTHENTICATED,
                "this checkpoint store cannot check user tokens: it was started without --master",
            )
        if self._channel is None:
            self._channel = _grpc.aio_channel(self.master)
        stub = cast("auth_pb2_grpc.AuthServiceAsyncStub", auth_pb2_grpc.AuthServiceStub(self._channel))
        try:
            reply = await stub.ValidateToken(
                auth_pb2.ValidateTokenRequest(token=token), timeout=VALIDATE_TIMEOUT_SECONDS
            )
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.UNAUTHENTICATED:
                self._cache.pop(token, None)
                message = f"{e.details()}: log in with `pedl user login`"
                raise Denied(grpc.StatusCode.UNAUTHENTICATED, message) from None
            raise Denied(
                grpc.StatusCode.UNAVAILABLE, f"cannot check the token with the scheduler at {self.master}"
            ) from None
        principal = Principal(reply.user.username, reply.user.admin)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[token] = (now + min(self.cache_seconds, reply.expires_in_seconds), principal)
        return principal


class StoreAuthenticator:
    def __init__(self, secret: str, validator: TokenValidator) -> None:
        self.secret = secret
        self.validator = validator

    async def __call__(self, method: str, token: str | None) -> Principal:
        if token is None:
            raise Denied(grpc.StatusCode.UNAUTHENTICATED, "this call needs a credential (a pedl token)")
        if is_secret(token, self.secret):
            return CLUSTER
        if trial_token.is_trial_token(token):
            claim = trial_token.verify(self.secret, token)
            if claim is None:
                raise Denied(grpc.StatusCode.UNAUTHENTICATED, "the trial token is not valid or has expired")
            return principal_for_trial(claim)
        return await self.validator.validate(token)


def setup(
    config: Config,
) -> tuple[list[grpc.aio.ServerInterceptor], tuple[bytes, bytes] | None, StoreAuthz]:
    """The interceptors, TLS key pair and authorisation the config asks for; raises auth.AuthConfigError."""
    if bool(config.tls_cert) != bool(config.tls_key):
        raise auth.AuthConfigError("--tls-cert and --tls-key go together")
    tls = None
    if config.tls_cert:
        tls = (
            auth.read_pem(config.tls_cert, "TLS certificate"),
            auth.read_pem(config.tls_key, "TLS private key"),
        )
    secret = auth.cluster_secret(config.cluster_secret_file or None)
    if config.no_auth:
        auth.configure_process(credential=secret, tls_ca=config.tls_ca or None)
        return [], tls, StoreAuthz(None, None)
    if secret is None:
        raise auth.AuthConfigError(
            "authentication is on, but no cluster secret is configured: pass --cluster-secret-file FILE "
            "or set PEDL_CLUSTER_SECRET (or run with --no-auth for development)"
        )
    auth.configure_process(credential=secret, tls_ca=config.tls_ca or None)
    master = config.master or os.environ.get("PEDL_MASTER", "")
    validator = TokenValidator(master)
    return (
        [AuthInterceptor(StoreAuthenticator(secret, validator))],
        tls,
        StoreAuthz(secret, SchedulerAsker(master)),
    )
