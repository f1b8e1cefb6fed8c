"""The web UI's one way to the scheduler: each call carries the signed-in user's own token, so the
scheduler's checks (who may kill, pause, see) are exactly the CLI's; the web UI has no power of its own.

Identical reads at the same moment (same user, method and request) share one scheduler call
(`single_flight`): the experiment page's summary and importance both read the whole experiment.
"""

from __future__ import annotations

from typing import Any

import grpc

from pedl import _grpc
from pedl.auth import client_identity
from pedl.client import ClientError
from pedl.v1 import auth_pb2, auth_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from pedl_webui.single_flight import SingleFlight

CALL_TIMEOUT = 30.0
# The scheduler's unary calls that only read: concurrent identical ones share one call. Any other
# call through the gateway (a write) ends the sharing of reads begun before it, so a page that
# reads after its own kill or notes sees them.
READS = frozenset(
    {
        "GetExperiment",
        "ListExperiments",
        "GetTrial",
        "ListTrialDetails",
        "ListAgents",
        "GetClusterInfo",
        "GetMasterConfig",
        "GetModelDefinition",
    }
)


class GatewayError(ClientError):
    """A scheduler refusal as the web UI answers it: the one client error (`pedl.client`, as the CLI
    and the SDK raise) with the HTTP status the page gets."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message, bad_input=400 <= status < 500)
        self.status = status


_HTTP_STATUS = {
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.UNAVAILABLE: 503,
}


def error_of(e: grpc.RpcError) -> GatewayError:
    code = e.code()
    return GatewayError(_HTTP_STATUS.get(code, 502), e.details() or code.name)


class Gateway:
    """Shared channel to the scheduler (one HTTP/2 connection however many pages are open)."""

    def __init__(self, master: str, tls_ca: str | None = None) -> None:
        self.master = master
        self._channel = _grpc.passthrough_channel(master, tls_ca=tls_ca)
        self.scheduler = scheduler_pb2_grpc.SchedulerServiceStub(self._channel)
        self.auth = auth_pb2_grpc.AuthServiceStub(self._channel)
        self.reads: SingleFlight[Any] = SingleFlight(share=_copy)

    def close(self) -> None:
        self._channel.close()

    def login(
        self, username: str, password: str, hashed: bool = False, browser: str = ""
    ) -> auth_pb2.LoginResponse:
        """`hashed`: the password in Determined's client-side form (its clients send that).
        `browser` is the client's address: the scheduler limits failed logins per client, and every
        browser and REST client reaches it through this one process."""
        try:
            return self.auth.Login(
                auth_pb2.LoginRequest(username=username, password=password, hashed=hashed),
                timeout=CALL_TIMEOUT,
                metadata=client_identity.metadata(f"webui-{browser}"),
            )
        except grpc.RpcError as e:
            raise error_of(e) from None

    def call(self, token: str, method: str, request: Any) -> Any:
        """A unary scheduler (or auth) call as the user `token` belongs to; a read (`READS`) shares
        the identical one of the same user in flight, if any (each caller gets its own message)."""
        if method in READS:
            key = (token, method, request.SerializeToString(deterministic=True))
            return self.reads.call(key, lambda: self._call(token, method, request))
        try:
            return self._call(token, method, request)
        finally:
            self.reads.forget()

    def _call(self, token: str, method: str, request: Any) -> Any:
        stub = self.auth if hasattr(self.auth, method) else self.scheduler
        try:
            return getattr(stub, method)(request, timeout=CALL_TIMEOUT, metadata=_bearer(token))
        except grpc.RpcError as e:
            raise error_of(e) from None

    def stream(self, token: str, method: str, request: Any) -> Any:
        """A server stream as the user: iterate the returned call object; `.cancel()` ends it."""
        return getattr(self.scheduler, method)(request, metadata=_bearer(token))

    def logout(self, token: str) -> None:
        try:
            self.auth.Logout(auth_pb2.LogoutRequest(), timeout=CALL_TIMEOUT, metadata=_bearer(token))
        except grpc.RpcError:
            pass  # an expired session is as good as ended
        self.reads.forget()  # no read begun in the ended session is shared after it

    def whoami(self, token: str) -> auth_pb2.User | None:
        """The token's user, or None when it is not (or no longer) a valid session."""
        try:
            return self.auth.WhoAmI(
                auth_pb2.WhoAmIRequest(), timeout=CALL_TIMEOUT, metadata=_bearer(token)
            ).user
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                return None
            raise error_of(e) from None


def _copy(message: Any) -> Any:
    clone = type(message)()
    clone.CopyFrom(message)
    return clone


def _bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


__all__ = ["Gateway", "GatewayError", "error_of", "scheduler_pb2"]
