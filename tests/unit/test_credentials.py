"""Client credentials (auth.json, precedence), trial tokens, and the server interceptor's refusals."""

from __future__ import annotations

import asyncio
import stat

import grpc
import grpc.aio
import pytest

from pedl import _grpc, auth
from pedl.v1 import auth_pb2, auth_pb2_grpc
from pedl_server_auth import AuthInterceptor, Denied, Principal, bearer_token, current_principal, trial_token


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for name in (auth.ENV_TOKEN, auth.ENV_CLUSTER_SECRET, auth.ENV_TLS_CA):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PEDL_HOME", str(tmp_path / "home"))
    auth.configure_process()


def test_logins_are_private_and_found_for_the_master_and_its_store(monkeypatch: pytest.MonkeyPatch) -> None:
    path = auth.save_login("m:1", {"token": "tok", "checkpoint_store": "s:2", "username": "u"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert auth.credential_for("m:1") == auth.credential_for("s:2") == "tok"
    assert auth.credential_for("other:3") is None
    monkeypatch.setenv(auth.ENV_CLUSTER_SECRET, "s" * 20)
    assert auth.credential_for("other:3") == "s" * 20  # the last resort
    monkeypatch.setenv(auth.ENV_TOKEN, "env-token")
    assert auth.credential_for("m:1") == "env-token"
    auth.configure_process(credential="service-secret")
    assert auth.credential_for("m:1") == "service-secret"  # a service always presents its own
    auth.configure_process()
    assert auth.forget_login("m:1") is not None and auth.load_logins() == {}


def test_bad_secret_and_pem_files_are_clear_errors(tmp_path) -> None:
    short = tmp_path / "short"
    short.write_text("abc\n")
    with pytest.raises(auth.AuthConfigError, match="shorter than 16"):
        auth.cluster_secret(str(short))
    with pytest.raises(auth.AuthConfigError, match="cannot read"):
        auth.cluster_secret(str(tmp_path / "missing"))
    with pytest.raises(auth.AuthConfigError, match="not a PEM"):
        auth.read_pem(short, "TLS CA bundle")
    assert auth.cluster_secret(None, {"PEDL_CLUSTER_SECRET": "x" * 16}) == "x" * 16


def test_trial_tokens_verify_only_when_genuine_and_unexpired() -> None:
    parent = "0f3c2a9e-5d1b-4c6e-8a7f-1b2c3d4e5f60"
    token = trial_token.mint("s" * 32, 7, 11, 3, (parent, ""), ttl_seconds=60, now=1000)
    claim = trial_token.verify("s" * 32, token, now=1000)
    assert claim == trial_token.Claim(7, 11, 3, 1060, frozenset({parent}))
    assert trial_token.verify("t" * 32, token, now=1000) is None  # another cluster's secret
    assert trial_token.verify("s" * 32, token, now=1061) is None  # expired
    forged = token.replace(".7.", ".8.", 1)
    assert trial_token.verify("s" * 32, forged, now=1000) is None
    widened = token.replace(parent, parent + ",another-checkpoint")
    assert trial_token.verify("s" * 32, widened, now=1000) is None  # grants are signed too
    assert trial_token.verify("s" * 32, "pedlt1.garbage", now=1000) is None
    # The unscoped 30-day tokens of earlier versions are no longer accepted.
    assert trial_token.verify("s" * 32, "pedlt1.7.11.99999999999.sig", now=1000) is None
    with pytest.raises(ValueError, match="not a checkpoint uuid"):
        trial_token.mint("s" * 32, 7, 11, 3, ("a.b",))


def test_bearer_token_parsing() -> None:
    assert bearer_token([("authorization", "Bearer abc")]) == "abc"
    assert bearer_token([("authorization", "bearer  abc ")]) == "abc"
    assert bearer_token([("authorization", "Basic abc")]) is None
    assert bearer_token([("x", "y")]) is None


class _Who(auth_pb2_grpc.AuthServiceServicer):
    async def WhoAmI(self, request, context):  # noqa: N802
        p = current_principal()
        return auth_pb2.WhoAmIResponse(user=auth_pb2.User(username=p.username, admin=p.admin))


async def _authenticate(method: str, token: str | None) -> Principal:
    if token == "good":
        return Principal("alice", admin=False)
    raise Denied(grpc.StatusCode.UNAUTHENTICATED, "no")


def test_interceptor_refuses_bad_tokens_and_hands_the_caller_to_the_servicer() -> None:
    async def scenario() -> None:
        server, port = _grpc.aio_server(
            [lambda s: auth_pb2_grpc.add_AuthServiceServicer_to_server(_Who(), s)],
            ["pedl.v1.AuthService"],
            "127.0.0.1:0",
            interceptors=[AuthInterceptor(_authenticate)],
        )
        await server.start()
        try:
            for token, expected in (("good", "alice"), ("bad", None), (None, None)):
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                    md = [("authorization", f"Bearer {token}")] if token else []
                    call = auth_pb2_grpc.AuthServiceStub(ch).WhoAmI(auth_pb2.WhoAmIRequest(), metadata=md)
                    if expected is None:
                        with pytest.raises(grpc.aio.AioRpcError) as info:
                            await call
                        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
                    else:
                        assert (await call).user.username == expected
        finally:
            await server.stop(None)

    asyncio.run(scenario())
