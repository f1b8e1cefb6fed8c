"""Sessions a user or an admin can end, and logins that cannot be guessed quickly, on real services:
`pedl user logout --all` / `det user logout --all`, deactivation, and per-user and per-client
attempt limits that treat unknown users exactly as known ones and never lock out other clients."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from pedl.auth import client_identity
from pedl.auth.bearer import BearerInterceptor
from pedl.v1 import auth_pb2, auth_pb2_grpc, checkpoint_store_pb2, checkpoint_store_pb2_grpc
from pedl_server_auth import trial_token
from support.processes import BIN, LocalCluster, local_cluster, login

pytestmark = pytest.mark.integration
FREE_PER_CLIENT = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalCluster]:  # type: ignore[no-untyped-def]
    # 6 free failures per client (20 by default): each failure hashes a password (scrypt, 128 MiB).
    args = ["--login-free-failures", f"5,{FREE_PER_CLIENT}"]
    with local_cluster(tmp_path_factory.mktemp("sessions") / "cluster", agents=0, scheduler_args=args) as c:
        try:
            yield c
        except BaseException:
            print(c.logs())
            raise


def _channel(address: str, token: str | None) -> grpc.Channel:
    channel = grpc.insecure_channel(address)
    return grpc.intercept_channel(channel, BearerInterceptor(token)) if token else channel


def works(cluster: LocalCluster, token: str) -> tuple[bool, bool]:
    """(the scheduler accepts `token`, the checkpoint store accepts it)."""
    results = []
    for call in (
        lambda: auth_pb2_grpc.AuthServiceStub(_channel(cluster.master, token)).WhoAmI(
            auth_pb2.WhoAmIRequest(), timeout=30
        ),
        lambda: checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(
            _channel(cluster.store.address, token)
        ).ListCheckpoints(checkpoint_store_pb2.ListCheckpointsRequest(), timeout=30),
    ):
        try:
            call()
            results.append(True)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e
            results.append(False)
    return results[0], results[1]


def create(cluster: LocalCluster, name: str) -> None:
    stub = auth_pb2_grpc.AuthServiceStub(_channel(cluster.master, cluster.token))
    stub.CreateUser(auth_pb2.CreateUserRequest(username=name, password=name * 4), timeout=60)


@pytest.mark.parametrize("cli", ["pedl", "det"])
def test_logout_all_ends_every_session_of_the_user(cluster: LocalCluster, tmp_path: Path, cli: str) -> None:
    name = f"user{cli}"
    create(cluster, name)
    elsewhere = login(cluster.master, name, name * 4)  # another machine's session
    someone_else = login(cluster.master, "admin", cluster.admin_password)
    env = {k: v for k, v in os.environ.items() if k not in ("PEDL_TOKEN", "PEDL_CLUSTER_SECRET")}
    env.update(PEDL_HOME=str(tmp_path / "home"), PEDL_MASTER=cluster.master, DET_MASTER=cluster.master)

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / cli), *args], input=stdin, env=env, capture_output=True, text=True, timeout=120
        )

    assert run("user", "login", name, "--password-stdin", stdin=name * 4 + "\n").returncode == 0
    here = run("user", "token").stdout.strip()
    assert works(cluster, here) == works(cluster, elsewhere) == (True, True)
    out = run("user", "logout", "--all")
    assert out.returncode == 0, out.stderr
    assert "ended 2 sessions" in out.stdout
    assert works(cluster, here) == works(cluster, elsewhere) == (False, False)
    assert works(cluster, someone_else) == (True, True)


def test_deactivation_ends_sessions_at_once_everywhere(cluster: LocalCluster) -> None:
    create(cluster, "grace")
    token = login(cluster.master, "grace", "grace" * 4)
    assert works(cluster, token) == (True, True)
    admin = auth_pb2_grpc.AuthServiceStub(_channel(cluster.master, cluster.token))
    admin.SetUserActive(auth_pb2.SetUserActiveRequest(username="grace", active=False), timeout=30)
    assert works(cluster, token) == (False, False)  # no grace period in the store's cache either
    admin.SetUserActive(auth_pb2.SetUserActiveRequest(username="grace", active=True), timeout=30)
    assert works(cluster, token) == (False, False)  # reactivation does not bring sessions back
    assert works(cluster, login(cluster.master, "grace", "grace" * 4)) == (True, True)


def _login_code(
    cluster: LocalCluster, name: str, password: str, client: str = "", token: str | None = None
) -> tuple[grpc.StatusCode, str]:
    stub = auth_pb2_grpc.AuthServiceStub(_channel(cluster.master, token))
    metadata = client_identity.metadata(client) if client else None
    try:
        stub.Login(auth_pb2.LoginRequest(username=name, password=password), timeout=60, metadata=metadata)
    except grpc.RpcError as e:
        return e.code(), e.details() or ""
    return grpc.StatusCode.OK, ""


def test_repeated_wrong_logins_must_wait_for_known_and_unknown_users_alike(cluster: LocalCluster) -> None:
    create(cluster, "heidi")
    for name in ("heidi", "no-such-user"):
        answers = [_login_code(cluster, name, "wrong-password", client=f"cli-{name}") for _ in range(5)]
        assert [code for code, _ in answers] == [grpc.StatusCode.UNAUTHENTICATED] * 5, answers
        # The 5th failure starts a 2 s wait: until it ends every try is refused unchecked, even
        # heidi's right password (answered after a 1 s tarpit).
        password = "heidi" * 4 if name == "heidi" else "wrong-password"
        code, message = _login_code(cluster, name, password, client=f"cli-{name}")
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (code, message)
        assert f"too many failed logins for user {name!r}: try again in" in message, message
    # Other users still log in from the same address.
    assert _login_code(cluster, "admin", cluster.admin_password)[0] == grpc.StatusCode.OK


def test_one_client_spraying_wrong_logins_locks_out_no_other_client_on_its_address(
    cluster: LocalCluster,
) -> None:
    create(cluster, "ivan")
    # Before: 20 failures from 127.0.0.1 made everyone's logins there wait, the admin's included.
    answers = [
        _login_code(cluster, f"spray-{i}", "wrong", client="script-guesser")
        for i in range(FREE_PER_CLIENT + 1)
    ]
    assert {code for code, _ in answers[:-1]} == {grpc.StatusCode.UNAUTHENTICATED}, answers
    code, message = answers[-1]
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, answers[-1]
    assert "too many failed logins for this client, 127.0.0.1 (script-guesser): try again in" in message
    assert _login_code(cluster, "ivan", "ivan" * 4, client="cli-ivan")[0] == grpc.StatusCode.OK
    assert (
        _login_code(cluster, "admin", cluster.admin_password, client="webui-10.1.2.3")[0]
        == grpc.StatusCode.OK
    )
    assert _login_code(cluster, "ivan", "ivan" * 4)[0] == grpc.StatusCode.OK  # an old client sends none


def test_a_trial_cannot_log_in_to_guess_passwords(cluster: LocalCluster) -> None:
    secret = cluster.secret_file.read_text().strip()
    token = trial_token.mint(secret, experiment_id=1, trial_id=1, run_id=1)
    for answer in (
        _login_code(cluster, "admin", "guess", token=token),
        _login_code(cluster, "admin", cluster.admin_password, client="trial-9"),
    ):
        assert answer == (grpc.StatusCode.PERMISSION_DENIED, "a trial cannot log in as a user"), answer
    assert _login_code(cluster, "admin", cluster.admin_password, client="cli-admin")[0] == grpc.StatusCode.OK


def test_a_password_change_ends_the_users_other_sessions_and_needs_the_current_one(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    create(cluster, "judy")
    here, elsewhere = (login(cluster.master, "judy", "judy" * 4) for _ in range(2))
    assert works(cluster, here) == works(cluster, elsewhere) == (True, True)
    own = auth_pb2_grpc.AuthServiceStub(_channel(cluster.master, here))
    for current, code in (
        ("", grpc.StatusCode.INVALID_ARGUMENT),
        ("wrong", grpc.StatusCode.PERMISSION_DENIED),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            request = auth_pb2.SetUserPasswordRequest(
                username="judy", password="x" * 12, current_password=current
            )
            own.SetUserPassword(request, timeout=60)
        assert refused.value.code() == code, refused.value.details()
    assert works(cluster, elsewhere) == (True, True)  # nothing changed

    # The CLI asks for the current password first (here on stdin), then the new one.
    env = {k: v for k, v in os.environ.items() if k not in ("PEDL_CLUSTER_SECRET",)}
    env.update(PEDL_TOKEN=here, PEDL_HOME=str(tmp_path / "home"), PEDL_MASTER=cluster.master)
    out = subprocess.run(
        [str(BIN / "pedl"), "user", "change-password", "--password-stdin"],
        input="judy" * 4 + "\n" + "judy-new-password\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "Changed the password of judy; ended 1 other session" in out.stdout
    assert works(cluster, here) == (True, True)  # the session that changed it goes on
    assert works(cluster, elsewhere) == (False, False)  # before: every session stayed valid

    # An admin's reset ends all of them.
    admin = auth_pb2_grpc.AuthServiceStub(_channel(cluster.master, cluster.token))
    reply = admin.SetUserPassword(
        auth_pb2.SetUserPasswordRequest(username="judy", password="y" * 12), timeout=60
    )
    assert reply.sessions_ended == 1
    assert works(cluster, here) == (False, False)
    assert works(cluster, login(cluster.master, "judy", "y" * 12)) == (True, True)
