"""Who may call the scheduler, and AuthService: logins, users, and token checks for other services.

Agents and the checkpoint store present the cluster secret; users present a session token from
Login. AgentLinkService and ValidateToken accept only the cluster secret.
"""

from __future__ import annotations

import grpc

from pedl._server_auth import CLUSTER, Denied, Principal, bearer_token, current_principal, is_secret
from pedl.v1 import auth_pb2, auth_pb2_grpc
from pedl_scheduler.users import Session, User, UserError, UserExists, UserNotFound, Users, rfc3339

LOGIN = "/pedl.v1.AuthService/Login"
CLUSTER_ONLY = frozenset({"/pedl.v1.AgentLinkService/Connect", "/pedl.v1.AuthService/ValidateToken"})
NO_CREDENTIAL = (
    "this call needs a credential: log in with `pedl user login` "
    "(or send metadata `authorization: Bearer <token>`)"
)


def _user_proto(user: User) -> auth_pb2.User:
    return auth_pb2.User(
        username=user.username, admin=user.admin, created_at=user.created_at, active=user.active
    )


class SchedulerAuthenticator:
    def __init__(self, users: Users, cluster_secret: str) -> None:
        self.users = users
        self.secret = cluster_secret

    async def __call__(self, method: str, token: str | None) -> Principal:
        if token is None:
            raise Denied(grpc.StatusCode.UNAUTHENTICATED, NO_CREDENTIAL)
        if is_secret(token, self.secret):
            return CLUSTER
        session = self.users.session(token)
        if method in CLUSTER_ONLY:
            if isinstance(session, Session):
                raise Denied(grpc.StatusCode.PERMISSION_DENIED, f"{method} is for pedl services only")
            raise Denied(grpc.StatusCode.UNAUTHENTICATED, "wrong cluster secret")
        if not isinstance(session, Session):
            raise Denied(grpc.StatusCode.UNAUTHENTICATED, f"{session}: log in again with `pedl user login`")
        return Principal(session.user.username, session.user.admin)


class AuthServicer(auth_pb2_grpc.AuthServiceServicer):
    def __init__(self, users: Users, enabled: bool) -> None:
        self.users = users
        self.enabled = enabled

    async def _need_auth(self, context) -> None:  # type: ignore[no-untyped-def]
        if not self.enabled:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, "authentication is off on this scheduler (--no-auth)"
            )

    async def Login(self, request, context):  # noqa: N802
        await self._need_auth(context)
        result = self.users.login(request.username, request.password)
        if result is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "wrong username or password")
        token, session = result
        return auth_pb2.LoginResponse(
            token=token, user=_user_proto(session.user), expires_at=rfc3339(session.expires_at)
        )

    async def Logout(self, request, context):  # noqa: N802
        await self._need_auth(context)
        token = bearer_token(context.invocation_metadata())
        if token:
            self.users.logout(token)
        return auth_pb2.LogoutResponse()

    async def WhoAmI(self, request, context):  # noqa: N802
        p = current_principal()
        return auth_pb2.WhoAmIResponse(user=auth_pb2.User(username=p.username or p.kind, admin=p.admin))

    async def CreateUser(self, request, context):  # noqa: N802
        await self._need_auth(context)
        if not current_principal().admin:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "only an admin can create users")
        try:
            user = self.users.create(request.username, request.password, request.admin)
        except UserExists as e:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, str(e))
        except UserError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return auth_pb2.CreateUserResponse(user=_user_proto(user))

    async def ListUsers(self, request, context):  # noqa: N802
        return auth_pb2.ListUsersResponse(users=[_user_proto(u) for u in self.users.list()])

    async def SetUserPassword(self, request, context):  # noqa: N802
        await self._need_auth(context)
        principal = current_principal()
        if not principal.admin and principal.username != request.username:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "only an admin can change another user's password"
            )
        try:
            self.users.change_password(request.username, request.password)
        except UserNotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except UserError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return auth_pb2.SetUserPasswordResponse()

    async def SetUserActive(self, request, context):  # noqa: N802
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

    async def ValidateToken(self, request, context):  # noqa: N802
        await self._need_auth(context)
        session = self.users.session(request.token)
        if not isinstance(session, Session):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, session)
        return auth_pb2.ValidateTokenResponse(
            user=_user_proto(session.user),
            expires_in_seconds=max(0.0, session.expires_at - self.users.clock()),
        )
