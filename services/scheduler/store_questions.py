"""The scheduler's answers to the checkpoint store's `AuthService.Authorize`: the store holds the
bytes, the scheduler knows who owns what, so the store asks rather than judging a token itself.

A user's session: the rule of `pedl_server_auth.authz.may` (read: everyone, or owners only with
`--private-experiments`; delete and write: owner or admin). Experiment 0 asks "every experiment?"
(a listing across experiments: yes for admins and when experiments are not private).
A trial's token: genuine, unexpired, and its run still the trial's live run (the trial neither
ended nor started another run); the store itself checks the token's scope (its own trial, the
checkpoints granted at dispatch).
"""

from __future__ import annotations

from pedl.v1 import auth_pb2
from pedl_scheduler.storage import Storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_scheduler.users import Session, Users
from pedl_server_auth import Principal, authz, trial_token

# A user's answer is not remembered (deactivation and `logout --all` take effect at once); a trial
# run's for a few seconds (its token is revoked that long after the run ends).
TRIAL_CACHE_SECONDS = 5.0
LIVE_TRIAL_STATES = ("ACTIVE", "PAUSED")  # a pausing trial still uploads its last checkpoint


class StoreQuestions:
    def __init__(self, db: Storage, users: Users, secret: str, private: bool) -> None:
        self.db = db
        self.users = users
        self.secret = secret
        self.private = private

    def answer(self, request: auth_pb2.AuthorizeRequest) -> auth_pb2.AuthorizeResponse:
        if trial_token.is_trial_token(request.token):
            return self._trial(request.token)
        access = authz.STORE_ACCESS.get(request.action)
        if access is None:
            return _no(f"unknown action {request.action!r}: one of {', '.join(sorted(authz.STORE_ACCESS))}")
        session = self.users.session(request.token)
        if not isinstance(session, Session):
            return _no(f"{session}: log in again with `pedl user login`")
        principal = Principal(session.user.username, session.user.admin)
        user = auth_pb2.User(username=session.user.username, admin=session.user.admin, active=True)
        exp_id = request.experiment_id
        if exp_id == 0:
            every = principal.admin or (access is authz.Access.READ and not self.private)
            return auth_pb2.AuthorizeResponse(allowed=every, user=user)
        owner = experiment_ops.experiment_owner(self.db, exp_id)
        if authz.may(principal, access, owner, self.private):
            return auth_pb2.AuthorizeResponse(allowed=True, user=user)
        return _no(authz.refusal(principal, access, exp_id, owner), user, ttl=0.0)

    def _trial(self, token: str) -> auth_pb2.AuthorizeResponse:
        claim = trial_token.verify(self.secret, token)
        if claim is None:
            return _no("the trial token is not valid or has expired")
        row = trial_ops.trial(self.db, claim.trial_id)
        user = auth_pb2.User(username=f"trial-{claim.trial_id}")
        if row is None or row["experiment_id"] != claim.experiment_id:
            return _no(f"trial {claim.trial_id} does not exist", user)
        if row["run_id"] != claim.run_id or row["state"] not in LIVE_TRIAL_STATES:
            return _no(f"run {claim.run_id} of trial {claim.trial_id} has ended: its token is revoked", user)
        return auth_pb2.AuthorizeResponse(allowed=True, user=user, cache_seconds=TRIAL_CACHE_SECONDS)


def _no(
    reason: str, user: auth_pb2.User | None = None, ttl: float = TRIAL_CACHE_SECONDS
) -> auth_pb2.AuthorizeResponse:
    return auth_pb2.AuthorizeResponse(allowed=False, reason=reason, user=user, cache_seconds=ttl)
