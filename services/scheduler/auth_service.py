"""Who is calling the scheduler, and AuthService: logins, users, and token checks for other services.

Agents and the checkpoint store present the cluster secret; users present a session token from
Login; a trial's token is recognised only to be refused. What each may call is `authz.RULES`.
"""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio

from pedl.auth import client_identity
from pedl.v1 import auth_pb2, auth_pb2_grpc
from pedl_scheduler.login_guard import TARPIT_SECONDS, AttemptLimits, Busy, Client, HashPool, peer_address
from pedl_scheduler.store_questions import StoreQuestions
from pedl_scheduler.users import (
    RECENT_LOGIN_SECONDS,
    AccountError,
    AgentUserLink,
    Session,
    User,
    UserExists,
    UserNotFound,
    Users,
    hash_password,
    is_active,
    rfc3339,
    verify,
)
from pedl_server_auth import (
    CLUSTER,
    Denied,
    Principal,
    authz,
    bearer_token,
    current_principal,
    is_secret,
    trial_token,
)

LOGIN = "/pedl.v1.AuthService/Login"
CLUSTER_ONLY = frozenset(m for m, rule in authz.RULES.items() if rule.who is authz.Who.CLUSTER)
NO_CREDENTIAL = (
    "this call needs a credential: log in with `pedl user login` "
    "(or send metadata `authorization: Bearer <token>`)"
)


def _user_proto(user: User) -> auth_pb2.User:
    return auth_pb2.User(
        username=user.username,
        admin=user.admin,
        created_at=user.created_at,
        active=user.active,
        display_name=user.display_name,
        id=user.id,
    )


def _client(context: grpc.aio.ServicerContext) -> Client:
    """The caller for login limits: its address and the identity it sent."""
    return Client(peer_address(context.peer() or ""), client_identity.received(context.invocation_metadata()))


class SchedulerAuthenticator:
    def __init__(self, users: Users, cluster_secret: str) -> None:
        self.users = users
        self.secret = cluster_secret

    async def __call__(self, method: str, token: str | None) -> Principal:
        principal = await self._identify(method, token)
        authz.check_call(principal, method)
        return principal

    async def _identify(self, method: str, token: str | None) -> Principal:
        if token is None:
            raise Denied(grpc.StatusCode.UNAUTHENTICATED, NO_CREDENTIAL)
        if is_secret(token, self.secret):
            return CLUSTER
        if trial_token.is_trial_token(token):
            claim = trial_token.verify(self.secret, token)
            if claim is None:
                raise Denied(grpc.StatusCode.UNAUTHENTICATED, "the trial token is not valid or has expired")
            return Principal(
                f"trial-{claim.trial_id}",
                False,
                kind="trial",
                experiment_id=claim.experiment_id,
                trial_id=claim.trial_id,
                run_id=claim.run_id,
            )
        session = self.users.session(token)
        if not isinstance(session, Session):
            if method in CLUSTER_ONLY:
                raise Denied(grpc.StatusCode.UNAUTHENTICATED, "wrong cluster secret")
            raise Denied(grpc.StatusCode.UNAUTHENTICATED, f"{session}: log in again with `pedl user login`")
        return Principal(session.user.username, session.user.admin)


class AuthServicer(auth_pb2_grpc.AuthServiceServicer):
    def __init__(
        self,
        users: Users,
        enabled: bool,
        store_questions: StoreQuestions | None = None,
        hash_pool: HashPool | None = None,
        limits: AttemptLimits | None = None,
    ) -> None:
        self.users = users
        self.enabled = enabled
        self.store_questions = store_questions
        self.hash_pool = hash_pool or HashPool()
        self.limits = limits or AttemptLimits()

    async def _need_auth(self, context: grpc.aio.ServicerContext) -> None:
        if not self.enabled:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, "authentication is off on this scheduler (--no-auth)"
            )

    async def Login(  # noqa: N802
        self, request: auth_pb2.LoginRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.LoginResponse:
        """Refused at once while the user or address must wait; hashing runs in the pool."""
        await self._need_auth(context)
        client = _client(context)
        token = bearer_token(context.invocation_metadata())
        if client.identity.startswith("trial-") or (token and trial_token.is_trial_token(token)):
            # Its token is all a trial needs; a trial trying passwords is guessing.
            await asyncio.sleep(TARPIT_SECONDS)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "a trial cannot log in as a user")
        wait = self.limits.wait(request.username, client)
        if wait is not None:
            await asyncio.sleep(min(wait.seconds, TARPIT_SECONDS))
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, wait.message(request.username, client))
        row = self.users.lookup(request.username)
        try:
            good, rehash = await self.hash_pool.run(
                verify, request.password, row, request.hashed, client=client
            )
        except Busy as e:
            await asyncio.sleep(TARPIT_SECONDS)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        if not good or row is None:
            self.limits.failed(request.username, client)
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "wrong username or password")
        self.limits.succeeded(request.username, client)
        if not is_active(row):
            # Only the right password learns this (Determined's answer, a 403 over REST).
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "user is not active")
        token, session = self.users.open_session(row, rehash)
        return auth_pb2.LoginResponse(
            token=token, user=_user_proto(session.user), expires_at=rfc3339(session.expires_at)
        )

    async def Logout(  # noqa: N802
        self, request: auth_pb2.LogoutRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.LogoutResponse:
        await self._need_auth(context)
        token = bearer_token(context.invocation_metadata())
        principal = current_principal()
        if request.all:
            if principal.kind != "user":
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION, "only a user's session can log out --all"
                )
            return auth_pb2.LogoutResponse(ended=self.users.logout_all(principal.username))
        if token:
            self.users.logout(token)
        return auth_pb2.LogoutResponse(ended=1 if principal.kind == "user" else 0)

    async def WhoAmI(  # noqa: N802
        self, request: auth_pb2.WhoAmIRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.WhoAmIResponse:
        p = current_principal()
        return auth_pb2.WhoAmIResponse(user=auth_pb2.User(username=p.username or p.kind, admin=p.admin))

    async def CreateUser(  # noqa: N802
        self, request: auth_pb2.CreateUserRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.CreateUserResponse:
        await self._need_auth(context)
        if not current_principal().admin:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "only an admin can create users")
        try:
            password_hash = await self.hash_pool.run(hash_password, request.password, request.hashed)
            user = self.users.create(request.username, request.password, request.admin, password_hash)
        except UserExists as e:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, str(e))
        except AccountError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except Busy as e:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        return auth_pb2.CreateUserResponse(user=_user_proto(user))

    async def ListUsers(  # noqa: N802
        self, request: auth_pb2.ListUsersRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.ListUsersResponse:
        return auth_pb2.ListUsersResponse(users=[_user_proto(u) for u in self.users.list()])

    async def SetUserPassword(  # noqa: N802
        self, request: auth_pb2.SetUserPasswordRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.SetUserPasswordResponse:
        await self._need_auth(context)
        principal = current_principal()
        if not authz.may_change_password(principal, request.username):
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "only an admin can change another user's password"
            )
        own = principal.kind == "user" and principal.username == request.username
        keep = bearer_token(context.invocation_metadata()) or "" if own else ""
        try:
            if own and request.recent_login_suffices and not request.current_password:
                await self._check_recent_login(keep, context)
            elif own:
                await self._check_current_password(request, context)
            new_hash = await self.hash_pool.run(hash_password, request.password, request.hashed)
            ended = self.users.change_password(request.username, request.password, new_hash, keep)
        except UserNotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except AccountError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except Busy as e:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        return auth_pb2.SetUserPasswordResponse(sessions_ended=ended)

    async def _check_recent_login(self, token: str, context: grpc.aio.ServicerContext) -> None:
        """Determined's own password change (its REST PatchUser) sends no current password; a
        login in the last few minutes stands in for it, so an old or stolen token still cannot."""
        session = self.users.session(token) if token else None
        if not isinstance(session, Session) or not session.logged_in_within(RECENT_LOGIN_SECONDS):
            minutes = RECENT_LOGIN_SECONDS // 60
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"log in again to change your password: this session logged in over {minutes:.0f} minutes "
                "ago (or give the current password: `pedl user change-password`)",
            )

    async def _check_current_password(
        self, request: auth_pb2.SetUserPasswordRequest, context: grpc.aio.ServicerContext
    ) -> None:
        """A session alone (a borrowed laptop, a stolen token) does not change a password; the
        check counts against the login limits, so it cannot be used to guess either."""
        if not request.current_password:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "give your current password to change it (current_password)"
            )
        client = _client(context)
        wait = self.limits.wait(request.username, client)
        if wait is not None:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, wait.message(request.username, client))
        good, _ = await self.hash_pool.run(
            verify, request.current_password, self.users.lookup(request.username), request.hashed
        )
        if not good:
            self.limits.failed(request.username, client)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "the current password is wrong")

    async def SetUserDisplayName(  # noqa: N802
        self, request: auth_pb2.SetUserDisplayNameRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.SetUserDisplayNameResponse:
        await self._need_auth(context)
        if not authz.may_change_password(current_principal(), request.username):
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "only an admin can change another user's display name"
            )
        try:
            user = self.users.set_display_name(request.username, request.display_name)
        except UserNotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except AccountError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return auth_pb2.SetUserDisplayNameResponse(user=_user_proto(user))

    async def SetUserActive(  # noqa: N802
        self, request: auth_pb2.SetUserActiveRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.SetUserActiveResponse:
        await self._need_auth(context)
        principal = current_principal()
        if not principal.admin:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "only an admin can activate or deactivate users"
            )
        if not request.active and principal.username == request.username:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "an admin cannot deactivate themself")
        try:
            user = self.users.set_active(request.username, request.active)
        except UserNotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        return auth_pb2.SetUserActiveResponse(user=_user_proto(user))

    async def RenameUser(  # noqa: N802
        self, request: auth_pb2.RenameUserRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.RenameUserResponse:
        await self._need_auth(context)
        if not current_principal().admin:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "only an admin can rename users")
        try:
            user = self.users.rename(request.username, request.new_username)
        except UserNotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except UserExists as e:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, str(e))
        except AccountError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return auth_pb2.RenameUserResponse(user=_user_proto(user))

    async def SetUserAdmin(  # noqa: N802
        self, request: auth_pb2.SetUserAdminRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.SetUserAdminResponse:
        await self._need_auth(context)
        principal = current_principal()
        if not principal.admin:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "only an admin can make users admins")
        if not request.admin and principal.kind == "user" and principal.username == request.username:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, "an admin cannot take away their own admin rights"
            )
        try:
            user = self.users.set_admin(request.username, request.admin)
        except UserNotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        return auth_pb2.SetUserAdminResponse(user=_user_proto(user))

    async def LinkAgentUser(  # noqa: N802
        self, request: auth_pb2.LinkAgentUserRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.LinkAgentUserResponse:
        await self._need_auth(context)
        if not current_principal().admin:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "only an admin can link users to agent users"
            )
        a = request.agent_user
        try:
            self.users.link_agent_user(request.username, AgentUserLink(a.uid, a.gid, a.user, a.group))
        except UserNotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except AccountError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return auth_pb2.LinkAgentUserResponse()

    async def ValidateToken(  # noqa: N802
        self, request: auth_pb2.ValidateTokenRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.ValidateTokenResponse:
        await self._need_auth(context)
        session = self.users.session(request.token)
        if not isinstance(session, Session):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, session)
        return auth_pb2.ValidateTokenResponse(
            user=_user_proto(session.user),
            expires_in_seconds=max(0.0, session.expires_at - self.users.clock()),
        )

    async def Authorize(  # noqa: N802
        self, request: auth_pb2.AuthorizeRequest, context: grpc.aio.ServicerContext
    ) -> auth_pb2.AuthorizeResponse:
        await self._need_auth(context)
        assert self.store_questions is not None
        return self.store_questions.answer(request)
