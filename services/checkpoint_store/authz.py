"""The checkpoint store's side of authorisation: it enforces the rules of `pedl_server_auth.authz`.

The rules (the table of who may do what to which checkpoint) are in that one module. A user's
token is never judged here: the store asks the scheduler (`AuthService.Authorize`, answered from
the same rules) on every call, so deactivation and `logout --all` act at once. A trial's token
carries its scope, signed (pedl_server_auth.trial_token), and its scope is checked here with
`authz.check_trial_scope`; whether its run is still live (not ended, no newer run) the store asks
the scheduler too, remembering a yes for a few seconds. While the scheduler cannot be reached, a
trial's signed scope stands until the token expires (so a scheduler restart does not fail
uploads) and a user's call is refused (UNAVAILABLE).
"""

from __future__ import annotations

import time
from typing import cast

import grpc
import grpc.aio

from pedl import _grpc, _log
from pedl.v1 import auth_pb2, auth_pb2_grpc, common_pb2
from pedl_server_auth import Denied, Principal, authz, bearer_token, current_principal, trial_token
from pedl_server_auth.authz import READ

log = _log.get_logger(component="checkpoint_store")
ASK_TIMEOUT_SECONDS = 10.0


class SchedulerAsker:
    """`AuthService.Authorize` answers, remembered for the time the scheduler allows."""

    def __init__(self, master: str) -> None:
        self.master = master
        self._cache: dict[tuple[str, str, int], tuple[float, auth_pb2.AuthorizeResponse]] = {}
        self._channel: grpc.aio.Channel | None = None

    async def ask(self, token: str, action: str, experiment_id: int) -> auth_pb2.AuthorizeResponse:
        key = (token, action, experiment_id)
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        if not self.master:
            raise Denied(
                grpc.StatusCode.UNAVAILABLE,
                "this checkpoint store cannot check tokens: it was started without --master",
            )
        if self._channel is None:
            self._channel = _grpc.aio_channel(self.master)
        request = auth_pb2.AuthorizeRequest(token=token, action=action, experiment_id=experiment_id)
        try:
            stub = cast("auth_pb2_grpc.AuthServiceAsyncStub", auth_pb2_grpc.AuthServiceStub(self._channel))
            reply = await stub.Authorize(request, timeout=ASK_TIMEOUT_SECONDS)
        except grpc.aio.AioRpcError as e:
            raise Denied(
                grpc.StatusCode.UNAVAILABLE,
                f"cannot check the caller with the scheduler at {self.master}: {e.details()}",
            ) from None
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key] = (now + reply.cache_seconds, reply)
        return reply


class StoreAuthz:
    def __init__(self, secret: str | None, asker: SchedulerAsker | None) -> None:
        self.secret = secret
        self.asker = asker
        self._warned_unreachable = False

    async def check(
        self,
        context: grpc.aio.ServicerContext,
        action: str,
        experiment_id: int,
        trial_id: int,
        uuid: str = "",
    ) -> None:
        """Aborts the call unless the caller may do `action` to that checkpoint."""
        try:
            await self._check(_token(context), action, experiment_id, trial_id, uuid)
        except Denied as r:
            await context.abort(r.code, r.message)

    async def _check(self, token: str, action: str, experiment_id: int, trial_id: int, uuid: str) -> None:
        principal = current_principal()
        if principal.kind in ("cluster", "anonymous"):
            return
        assert self.secret is not None and self.asker is not None
        if principal.kind == "trial":
            claim = trial_token.verify(self.secret, token)
            if claim is None:
                raise Denied(grpc.StatusCode.UNAUTHENTICATED, "the trial token is not valid or has expired")
            authz.check_trial_scope(claim, action, experiment_id, trial_id, uuid)
            await self._run_is_live(token, claim)
            return
        authz.check_user_in_store(action)
        reply = await self.asker.ask(token, action, experiment_id)
        if not reply.allowed:
            raise Denied(grpc.StatusCode.PERMISSION_DENIED, reply.reason)

    async def _run_is_live(self, token: str, claim: trial_token.Claim) -> None:
        assert self.asker is not None
        try:
            reply = await self.asker.ask(token, "run", claim.experiment_id)
        except Denied as r:
            if not self._warned_unreachable:  # once per outage, not per call
                log.warning("scheduler unreachable: trial tokens' signed scope stands", error=r.message)
            self._warned_unreachable = True
            return
        self._warned_unreachable = False
        if not reply.allowed:
            raise Denied(grpc.StatusCode.PERMISSION_DENIED, reply.reason)

    async def visible(
        self, context: grpc.aio.ServicerContext, checkpoints: list[common_pb2.Checkpoint], trial_id: int
    ) -> list[common_pb2.Checkpoint]:
        """What a listing may show this caller (aborting when the caller may list nothing asked for)."""
        principal = current_principal()
        if principal.kind in ("cluster", "anonymous"):
            return checkpoints
        token = _token(context)
        try:
            if principal.kind == "trial":
                await self._check(token, READ, principal.experiment_id, trial_id, "")
                return checkpoints
            assert self.asker is not None
            if (await self.asker.ask(token, READ, 0)).allowed:
                return checkpoints
            allowed: dict[int, bool] = {}
            for c in checkpoints:
                if c.experiment_id not in allowed:
                    allowed[c.experiment_id] = (await self.asker.ask(token, READ, c.experiment_id)).allowed
            return [c for c in checkpoints if allowed[c.experiment_id]]
        except Denied as r:
            await context.abort(r.code, r.message)
            raise  # unreachable: abort raises


def _token(context: grpc.aio.ServicerContext) -> str:
    return bearer_token(context.invocation_metadata()) or ""


def principal_for_trial(claim: trial_token.Claim) -> Principal:
    return Principal(f"trial-{claim.trial_id}", False, kind="trial", experiment_id=claim.experiment_id)
