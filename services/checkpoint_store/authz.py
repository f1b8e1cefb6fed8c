"""Who may do what to which checkpoint in the store: the store's one authorisation rule.

| call                                    | cluster | trial token (its run live)     | user session   |
|-----------------------------------------|---------|--------------------------------|----------------|
| UploadCheckpoint, Begin/Finish/AbortUpload | yes  | its own trial's only           | owner or admin |
| DownloadCheckpoint, GetCheckpoint       | yes     | its own trial's, and those it  | READ (below)   |
|                                         |         | was granted at dispatch (its   |                |
|                                         |         | latest, a PBT parent's, a warm |                |
|                                         |         | start's)                       |                |
| ListCheckpoints                         | yes     | its own trial (trial_id = its) | READ, filtered |
| DeleteCheckpoint                        | yes     | never                          | never (*)      |

(*) Users delete through the scheduler (`DeleteCheckpoints`), which owns a checkpoint's lifecycle:
it checks ownership and that nothing still needs the checkpoint, then deletes here with the cluster
secret. A delete here behind its back left it listing, and resuming trials from, checkpoints whose
bytes were gone.

A user's token is never judged here: the store asks the scheduler (`AuthService.Authorize`, the
rule in services/scheduler/authz.py; READ is everyone unless the scheduler runs with
`--private-experiments`) on every call, so deactivation and `logout --all` act at once. A trial's
token carries its scope, signed (pedl._trial_token), and is checked here; whether its run is
still live (not ended, no newer run) the store asks the scheduler too, remembering a yes for a few
seconds. While the scheduler cannot be reached, a trial's signed scope stands until the token
expires (so a scheduler restart does not fail uploads) and a user's call is refused (UNAVAILABLE).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import cast

import grpc
import grpc.aio

from pedl import _grpc, _log, _trial_token
from pedl._server_auth import Principal, bearer_token, current_principal
from pedl.v1 import auth_pb2, auth_pb2_grpc, common_pb2

log = _log.get_logger(component="checkpoint_store")
ASK_TIMEOUT_SECONDS = 10.0
READ, WRITE, DELETE = "read", "write", "delete"


@dataclass(frozen=True)
class Refusal(Exception):
    code: grpc.StatusCode
    message: str


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
            raise Refusal(
                grpc.StatusCode.UNAVAILABLE,
                "this checkpoint store cannot check tokens: it was started without --master",
            )
        if self._channel is None:
            self._channel = _grpc.aio_channel(self.master)
        request = auth_pb2.AuthorizeRequest(token=token, action=action, experiment_id=experiment_id)
        try:
            stub = cast("auth_pb2_grpc.AuthServiceAsyncStub", auth_pb2_grpc.AuthServiceStub(self._channel))
            reply = await stub.Authorize(
                request, timeout=ASK_TIMEOUT_SECONDS
            )
        except grpc.aio.AioRpcError as e:
            raise Refusal(
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
        except Refusal as r:
            await context.abort(r.code, r.message)

    async def _check(self, token: str, action: str, experiment_id: int, trial_id: int, uuid: str) -> None:
        principal = current_principal()
        if principal.kind in ("cluster", "anonymous"):
            return
        assert self.secret is not None and self.asker is not None
        if principal.kind == "trial":
            claim = _trial_token.verify(self.secret, token)
            if claim is None:
                raise Refusal(grpc.StatusCode.UNAUTHENTICATED, "the trial token is not valid or has expired")
            _trial_scope(claim, action, experiment_id, trial_id, uuid)
            await self._run_is_live(token, claim)
            return
        if action == DELETE:
            raise Refusal(
                grpc.StatusCode.PERMISSION_DENIED,
                "checkpoints are deleted through the scheduler (`pedl checkpoint delete UUID`), "
                "which checks ownership and that no trial needs them",
            )
        reply = await self.asker.ask(token, action, experiment_id)
        if not reply.allowed:
            raise Refusal(grpc.StatusCode.PERMISSION_DENIED, reply.reason)

    async def _run_is_live(self, token: str, claim: _trial_token.Claim) -> None:
        assert self.asker is not None
        try:
            reply = await self.asker.ask(token, "run", claim.experiment_id)
        except Refusal as r:
            if not self._warned_unreachable:  # once per outage, not per call
                log.warning("scheduler unreachable: trial tokens' signed scope stands", error=r.message)
            self._warned_unreachable = True
            return
        self._warned_unreachable = False
        if not reply.allowed:
            raise Refusal(grpc.StatusCode.PERMISSION_DENIED, reply.reason)

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
        except Refusal as r:
            await context.abort(r.code, r.message)
            raise  # unreachable: abort raises


def _trial_scope(
    claim: _trial_token.Claim, action: str, experiment_id: int, trial_id: int, uuid: str
) -> None:
    own = claim.experiment_id == experiment_id and claim.trial_id == trial_id
    if action == DELETE:
        raise Refusal(grpc.StatusCode.PERMISSION_DENIED, "a trial's token may not delete checkpoints")
    if own or (action == READ and uuid and uuid in claim.grants):
        return
    whose = f"trial {claim.trial_id} of experiment {claim.experiment_id}"
    if action == WRITE:
        raise Refusal(
            grpc.StatusCode.PERMISSION_DENIED, f"the token of {whose} may store only that trial's checkpoints"
        )
    raise Refusal(
        grpc.StatusCode.PERMISSION_DENIED,
        f"the token of {whose} may read only that trial's checkpoints and the ones it was started from",
    )


def _token(context: grpc.aio.ServicerContext) -> str:
    return bearer_token(context.invocation_metadata()) or ""


def principal_for_trial(claim: _trial_token.Claim) -> Principal:
    return Principal(f"trial-{claim.trial_id}", False, kind="trial", experiment_id=claim.experiment_id)
