"""Authentication and authorization on the real services: each bad credential is refused with the
right status and changes nothing; users act only on their own experiments unless admin."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from pedl import _grpc
from pedl.auth.bearer import BearerInterceptor
from pedl.context import pack
from pedl.v1 import (
    auth_pb2,
    auth_pb2_grpc,
    checkpoint_store_pb2,
    checkpoint_store_pb2_grpc,
    common_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
)
from pedl_server_auth import trial_token
from support.models import tiny_config, write_tiny_model
from support.processes import BIN, LocalCluster, local_cluster, login, start, stop

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("auth") / "cluster") as c:
        try:
            yield c
        except BaseException:
            print(c.logs())
            raise


def scheduler(master: str, token: str | None) -> scheduler_pb2_grpc.SchedulerServiceStub:
    """A stub presenting exactly `token` (None: no credential at all)."""
    return scheduler_pb2_grpc.SchedulerServiceStub(_raw(master, token))


def _raw(address: str, token: str | None) -> grpc.Channel:
    channel = grpc.insecure_channel(address)
    return grpc.intercept_channel(channel, BearerInterceptor(token)) if token else channel


def code_of(call) -> grpc.StatusCode:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code()


def create_user(cluster: LocalCluster, name: str, admin: bool = False) -> str:
    """Creates `name` (password = name * 3) as the admin; returns a fresh token of theirs."""
    stub = auth_pb2_grpc.AuthServiceStub(_grpc.channel(cluster.master))
    try:
        stub.CreateUser(auth_pb2.CreateUserRequest(username=name, password=name * 3, admin=admin), timeout=30)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.ALREADY_EXISTS
    return login(cluster.master, name, name * 3)


def submit(stub: scheduler_pb2_grpc.SchedulerServiceStub, tmp_path: Path) -> scheduler_pb2.Experiment:
    packed = pack(write_tiny_model(tmp_path / "tiny"))
    request = scheduler_pb2.CreateExperimentRequest(
        config_yaml=tiny_config(max_batches=100000),
        model_definition=packed.data,
        model_definition_name=packed.name,
    )
    return stub.CreateExperiment(request, timeout=30).experiment


def sessions(cluster: LocalCluster) -> int:
    with sqlite3.connect(cluster.workdir / "pedl.db") as db:
        return db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]


def test_calls_without_a_valid_token_are_unauthenticated(cluster: LocalCluster) -> None:
    list_request = scheduler_pb2.ListExperimentsRequest()
    assert code_of(lambda: scheduler(cluster.master, None).ListExperiments(list_request, timeout=10)) == (
        grpc.StatusCode.UNAUTHENTICATED
    )
    assert code_of(lambda: scheduler(cluster.master, "pedl_forged").ListExperiments(list_request)) == (
        grpc.StatusCode.UNAUTHENTICATED
    )
    # A trial's token is for the checkpoint store only (tests/integration/test_rpc_authorization.py).
    trial = trial_token.mint(cluster.secret_file.read_text().strip(), 1, 1, 1)
    assert code_of(lambda: scheduler(cluster.master, trial).ListExperiments(list_request)) == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    # Health stays open for probes (reflection too: see test_grpcurl).
    health = health_pb2_grpc.HealthStub(_raw(cluster.master, None))
    assert health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status == 1
    assert scheduler(cluster.master, cluster.token).ListExperiments(list_request, timeout=10) is not None

    store = checkpoint_store_pb2_grpc.CheckpointStoreServiceStub
    list_ckpts = checkpoint_store_pb2.ListCheckpointsRequest()
    for bad in (None, "pedl_forged", "pedlt1.1.1.99999999999.forged", "pedlt2.1.1.1.99999999999..forged"):
        assert code_of(
            lambda bad=bad: store(_raw(cluster.store.address, bad)).ListCheckpoints(list_ckpts)
        ) == (grpc.StatusCode.UNAUTHENTICATED), bad
    # A user's token is checked with the scheduler; a trial's token only for a live run of its trial.
    assert (
        store(_raw(cluster.store.address, cluster.token)).ListCheckpoints(list_ckpts, timeout=10) is not None
    )
    own = checkpoint_store_pb2.ListCheckpointsRequest(trial_id=1)
    assert code_of(lambda: store(_raw(cluster.store.address, trial)).ListCheckpoints(own)) == (
        grpc.StatusCode.PERMISSION_DENIED  # no such run
    )
    delete = checkpoint_store_pb2.DeleteCheckpointRequest(uuid="x")
    assert code_of(lambda: store(_raw(cluster.store.address, trial)).DeleteCheckpoint(delete)) == (
        grpc.StatusCode.NOT_FOUND  # a real one: PERMISSION_DENIED (test_rpc_authorization.py)
    )


def test_wrong_password_is_unauthenticated_and_creates_no_session(cluster: LocalCluster) -> None:
    create_user(cluster, "carol")
    before = sessions(cluster)
    stub = auth_pb2_grpc.AuthServiceStub(_raw(cluster.master, None))
    for name, password in (("carol", "not-carols-password"), ("nobody", "whatever12")):
        wrong = auth_pb2.LoginRequest(username=name, password=password)
        assert code_of(lambda wrong=wrong: stub.Login(wrong, timeout=10)) == grpc.StatusCode.UNAUTHENTICATED
    assert sessions(cluster) == before


def test_expired_and_logged_out_tokens_are_unauthenticated(cluster: LocalCluster) -> None:
    token = create_user(cluster, "dave")
    request = scheduler_pb2.ListExperimentsRequest()
    scheduler(cluster.master, token).ListExperiments(request, timeout=10)
    with sqlite3.connect(cluster.workdir / "pedl.db") as db:
        db.execute(
            "UPDATE sessions SET expires_at = 0 "
            "WHERE user_id = (SELECT id FROM users WHERE username = 'dave')"
        )
    with pytest.raises(grpc.RpcError) as info:
        scheduler(cluster.master, token).ListExperiments(request, timeout=10)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "expired" in info.value.details()

    token = login(cluster.master, "dave", "davedavedave")
    auth_pb2_grpc.AuthServiceStub(_raw(cluster.master, token)).Logout(auth_pb2.LogoutRequest(), timeout=10)
    assert code_of(lambda: scheduler(cluster.master, token).ListExperiments(request)) == (
        grpc.StatusCode.UNAUTHENTICATED
    )


def test_users_change_only_their_own_experiments_unless_admin(cluster: LocalCluster, tmp_path: Path) -> None:
    alice, bob = create_user(cluster, "alice"), create_user(cluster, "bob")
    exp = submit(scheduler(cluster.master, alice), tmp_path)
    assert exp.owner == "alice"
    ident = {"experiment_id": exp.id}
    as_bob = scheduler(cluster.master, bob)
    for call in (
        lambda: as_bob.KillExperiment(scheduler_pb2.KillExperimentRequest(**ident), timeout=10),
        lambda: as_bob.PauseExperiment(scheduler_pb2.PauseExperimentRequest(**ident), timeout=10),
        lambda: as_bob.ActivateExperiment(scheduler_pb2.ActivateExperimentRequest(**ident), timeout=10),
    ):
        assert code_of(call) == grpc.StatusCode.PERMISSION_DENIED
    got = as_bob.GetExperiment(scheduler_pb2.GetExperimentRequest(**ident), timeout=10).experiment
    assert got.state == common_pb2.EXPERIMENT_STATE_ACTIVE and got.owner == "alice"
    assert [
        e.owner
        for e in as_bob.ListExperiments(scheduler_pb2.ListExperimentsRequest()).experiments
        if e.id == exp.id
    ] == ["alice"]
    # Not an admin: cannot create users either.
    create = auth_pb2.CreateUserRequest(username="mallory", password="mallorymallory")
    assert code_of(lambda: auth_pb2_grpc.AuthServiceStub(_raw(cluster.master, bob)).CreateUser(create)) == (
        grpc.StatusCode.PERMISSION_DENIED
    )

    as_alice = scheduler(cluster.master, alice)
    paused = as_alice.PauseExperiment(scheduler_pb2.PauseExperimentRequest(**ident), timeout=10).experiment
    assert paused.state == common_pb2.EXPERIMENT_STATE_PAUSED
    # The admin may kill anyone's experiment (it ends once its trial has stopped).
    scheduler(cluster.master, cluster.token).KillExperiment(
        scheduler_pb2.KillExperimentRequest(**ident), timeout=10
    )


def test_an_agent_with_a_wrong_cluster_secret_is_refused(cluster: LocalCluster) -> None:
    wrong = cluster.workdir / "wrong-secret"
    wrong.write_text("x" * 40)
    agent = start(
        "intruder",
        ["pedl-agent", "--master", cluster.master, "--agent-id", "intruder", "--slots", "1",
         "--work-dir", str(cluster.workdir / "intruder"), "--cluster-secret-file", str(wrong)],
        cluster.workdir,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "wrong cluster secret" not in agent.log():
            assert time.monotonic() < deadline, agent.log()
            time.sleep(0.2)
        agents = scheduler(cluster.master, cluster.token).ListAgents(scheduler_pb2.ListAgentsRequest()).agents
        assert "intruder" not in {a.id for a in agents}
    finally:
        stop(agent.process)


def test_cli_login_create_list_logout(cluster: LocalCluster, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PEDL_TOKEN", "PEDL_CLUSTER_SECRET")}
    env.update(PEDL_HOME=str(tmp_path / "home"), PEDL_MASTER=cluster.master)

    def pedl(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "pedl"), *args], input=stdin, env=env, capture_output=True, text=True, timeout=60
        )

    denied = pedl("experiment", "list")
    assert denied.returncode == 1 and "pedl user login" in denied.stderr
    bad = pedl("user", "login", "admin", "--password-stdin", stdin="wrong-password\n")
    assert bad.returncode == 1 and "wrong username or password" in bad.stderr
    ok = pedl("user", "login", "admin", "--password-stdin", stdin=cluster.admin_password + "\n")
    assert ok.returncode == 0, ok.stderr
    auth_json = tmp_path / "home" / "auth.json"
    assert auth_json.stat().st_mode & 0o777 == 0o600
    assert cluster.admin_password not in auth_json.read_text()
    assert pedl("user", "token").stdout.strip() in auth_json.read_text()
    made = pedl("user", "create", "erin", "--password-stdin", stdin="erinerinerin\n")
    assert made.returncode == 0, made.stderr
    listed = pedl("user", "list")
    assert "erin" in listed.stdout and "admin" in listed.stdout
    assert "OWNER" in pedl("experiment", "list").stdout
    assert pedl("user", "logout").returncode == 0
    assert "token" not in auth_json.read_text()
    assert pedl("experiment", "list").returncode == 1


def test_no_secret_appears_in_any_log(cluster: LocalCluster) -> None:
    text = "\n".join(s.log() for s in [cluster.store, cluster.scheduler, *cluster.agents])
    for path in cluster.workdir.rglob("*.log"):
        text += path.read_text(errors="replace")
    for secret in (cluster.secret_file.read_text().strip(), cluster.admin_password, cluster.token):
        assert secret not in text
    assert "pedlt1." not in text
