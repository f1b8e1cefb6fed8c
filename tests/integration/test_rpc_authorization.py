"""Every RPC of every service × every kind of caller, against a real scheduler and checkpoint store.

The RPCs come from the protos' descriptors, so a new RPC without a row here fails
`test_every_rpc_has_a_row`. Callers: no credential, another user (bob), the owner (alice), an
admin, the cluster secret (what agents and the store present), the owner's trial run's token,
another trial's token, and the token of a run that has ended. The read rule is run twice: the
default (every user reads everything, as in Determined) and `--private-experiments`.
"""

from __future__ import annotations

import hashlib
import itertools
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from pedl.auth.bearer import BearerInterceptor
from pedl.context import pack
from pedl.v1 import (
    agent_pb2,
    auth_pb2,
    auth_pb2_grpc,
    checkpoint_store_pb2,
    checkpoint_store_pb2_grpc,
    harness_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
)
from pedl.v1 import agent_pb2_grpc as link_grpc
from pedl_server_auth import trial_token
from support.models import tiny_config, write_tiny_model
from support.processes import LocalCluster, local_cluster, login

pytestmark = pytest.mark.integration

CALLERS = ("none", "other", "owner", "admin", "cluster", "trial", "other_trial", "ended_trial")
OK, ALLOWED = "OK", "ALLOWED"  # ALLOWED: past authorisation, whatever the handler then says
DENIED, UNAUTH = grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED
NOT_FOUND, UNIMPLEMENTED = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED
SERVICES = [
    auth_pb2.DESCRIPTOR.services_by_name["AuthService"],
    scheduler_pb2.DESCRIPTOR.services_by_name["SchedulerService"],
    agent_pb2.DESCRIPTOR.services_by_name["AgentLinkService"],
    checkpoint_store_pb2.DESCRIPTOR.services_by_name["CheckpointStoreService"],
    harness_pb2.DESCRIPTOR.services_by_name["HarnessService"],
]


def row(
    none: Any, other: Any, owner: Any, admin: Any, cluster: Any, trial: Any, other_trial: Any, ended: Any
):  # type: ignore[no-untyped-def]
    return dict(zip(CALLERS, (none, other, owner, admin, cluster, trial, other_trial, ended), strict=True))


def signed_in() -> dict[str, Any]:
    return row(UNAUTH, OK, OK, OK, OK, DENIED, DENIED, DENIED)


def admins() -> dict[str, Any]:
    return row(UNAUTH, DENIED, DENIED, OK, OK, DENIED, DENIED, DENIED)


def services_only() -> dict[str, Any]:
    return row(UNAUTH, DENIED, DENIED, DENIED, OK, DENIED, DENIED, DENIED)


def manage() -> dict[str, Any]:
    return row(UNAUTH, DENIED, OK, OK, OK, DENIED, DENIED, DENIED)


def read(private: bool) -> dict[str, Any]:
    return row(UNAUTH, DENIED if private else OK, OK, OK, OK, DENIED, DENIED, DENIED)


def store_read(private: bool) -> dict[str, Any]:
    return row(UNAUTH, DENIED if private else OK, OK, OK, OK, OK, DENIED, DENIED)


def store_write() -> dict[str, Any]:
    return row(UNAUTH, DENIED, OK, OK, OK, OK, DENIED, DENIED)


def expected(private: bool) -> dict[str, dict[str, Any]]:
    """The table: full method name -> caller -> outcome."""
    a, s, c = "/pedl.v1.AuthService/", "/pedl.v1.SchedulerService/", "/pedl.v1.CheckpointStoreService/"
    return {
        a + "Login": row(OK, OK, OK, OK, OK, DENIED, DENIED, DENIED),  # a trial cannot try passwords
        a + "Logout": signed_in(),
        a + "WhoAmI": signed_in(),
        a + "CreateUser": admins(),
        a + "ListUsers": signed_in(),
        a + "SetUserPassword": row(UNAUTH, DENIED, OK, OK, OK, DENIED, DENIED, DENIED),
        a + "SetUserDisplayName": row(UNAUTH, DENIED, OK, OK, OK, DENIED, DENIED, DENIED),
        a + "SetUserActive": admins(),
        a + "LinkAgentUser": admins(),
        a + "RenameUser": admins(),
        a + "SetUserAdmin": admins(),
        a + "ValidateToken": services_only(),
        a + "Authorize": services_only(),
        "/pedl.v1.AgentLinkService/Connect": {**services_only(), "cluster": ALLOWED},
        s + "CreateExperiment": signed_in(),
        s + "UploadExperiment": signed_in(),
        s + "ListExperiments": signed_in(),  # filtered: see test_private_lists_show_only_ones_own
        s + "GetExperiment": read(private),
        s + "WaitExperiment": read(private),
        s + "KillExperiment": manage(),
        s + "PauseExperiment": manage(),
        s + "ActivateExperiment": manage(),
        s + "GetModelDefinition": read(private),
        s + "GetTrial": read(private),
        s + "PatchExperiment": manage(),
        s + "DeleteExperiment": manage(),
        s + "KillTrial": manage(),
        s + "DeleteCheckpoints": manage(),
        s + "RemoveCheckpointFiles": manage(),
        s + "SetCheckpointMetadata": manage(),
        # A script's own metrics: also the token of that trial's live run (not another's, nor an ended one's).
        s + "ReportTrialMetrics": row(UNAUTH, DENIED, OK, OK, OK, OK, DENIED, DENIED),
        s + "ListTrialDetails": read(private),
        s + "GetTrialLogs": read(private),
        s + "GetMetrics": read(private),
        s + "ListAgents": signed_in(),
        s + "SetAgentEnabled": {**admins(), "admin": NOT_FOUND, "cluster": NOT_FOUND},  # no such agent
        s + "GetClusterInfo": signed_in(),
        s + "GetMasterConfig": admins(),  # the flags it runs with name paths and hosts
        c + "UploadCheckpoint": store_write(),
        c
        + "BeginUpload": store_write(),  # a filesystem store answers "no direct upload": S3 in test_s3_direct
        # Nothing to finish or abort on a filesystem store: the uuid is unknown to every caller.
        c + "FinishUpload": row(UNAUTH, *[NOT_FOUND] * 7),
        c + "AbortUpload": row(UNAUTH, *[OK] * 7),
        c + "DownloadCheckpoint": store_read(private),
        c + "GetCheckpoint": store_read(private),
        c + "ListCheckpoints": {
            **store_read(private),
            "other": OK,
        },  # filtered: test_private_lists_show_only_ones_own
        # Users delete through the scheduler (DeleteCheckpoints): at the store only the cluster secret.
        c + "DeleteCheckpoint": row(UNAUTH, DENIED, DENIED, DENIED, OK, DENIED, DENIED, DENIED),
        c + "RemoveCheckpointFiles": row(UNAUTH, DENIED, DENIED, DENIED, OK, DENIED, DENIED, DENIED),
        # A trial's own TensorBoard files: as its checkpoints (a trial's token: its own trial only).
        c + "UploadTensorboardFiles": store_write(),
        c + "ListTensorboardFiles": store_read(private),
        # A file never uploaded: whoever may read it is told so.
        c + "DownloadTensorboardFile": {
            k: NOT_FOUND if v == OK else v for k, v in store_read(private).items()
        },
        # The scheduler's, when it deletes the experiment.
        c + "DeleteTensorboardFiles": row(UNAUTH, DENIED, DENIED, DENIED, OK, DENIED, DENIED, DENIED),
        # Served only by the agent, on each trial's own Unix socket inside its sandbox: never over TCP.
        **{f"/pedl.v1.HarnessService/{m}": row(*[UNIMPLEMENTED] * 8) for m in _harness_methods()},
    }


def _harness_methods() -> list[str]:
    return [m.name for m in harness_pb2.DESCRIPTOR.services_by_name["HarnessService"].methods]


def all_methods() -> list[str]:
    return [f"/{service.full_name}/{m.name}" for service in SERVICES for m in service.methods]


def test_every_rpc_has_a_row() -> None:
    """A new RPC needs its rule in the table (and in services/*/authz.py)."""
    for private in (False, True):
        table = expected(private)
        assert sorted(all_methods()) == sorted(table), set(all_methods()) ^ set(table)
        assert all(set(outcomes) == set(CALLERS) for outcomes in table.values())
    from pedl_server_auth import authz

    served_by_scheduler = [m for m in all_methods() if "CheckpointStore" not in m and "Harness" not in m]
    assert sorted(served_by_scheduler) == sorted(authz.RULES)


# ---- the cluster and its objects ----------------------------------------------------------------


def _channel(address: str, token: str | None) -> grpc.Channel:
    channel = grpc.insecure_channel(address)
    return grpc.intercept_channel(channel, BearerInterceptor(token)) if token else channel


@dataclass
class World:
    cluster: LocalCluster
    tmp: Path
    private: bool
    secret: str
    tokens: dict[str, str | None]
    exp_id: int = 0
    trial_id: int = 0
    uuid: str = ""
    counter: Iterator[int] = itertools.count()

    def scheduler(self, caller: str) -> scheduler_pb2_grpc.SchedulerServiceStub:
        return scheduler_pb2_grpc.SchedulerServiceStub(_channel(self.cluster.master, self.tokens[caller]))

    def auth(self, caller: str) -> auth_pb2_grpc.AuthServiceStub:
        return auth_pb2_grpc.AuthServiceStub(_channel(self.cluster.master, self.tokens[caller]))

    def store(self, caller: str) -> checkpoint_store_pb2_grpc.CheckpointStoreServiceStub:
        return checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(
            _channel(self.cluster.store.address, self.tokens[caller])
        )

    def new_experiment(self, owner: str = "owner") -> int:
        packed = pack(write_tiny_model(self.tmp / f"model{next(self.counter)}"))
        request = scheduler_pb2.CreateExperimentRequest(
            config_yaml=tiny_config(max_batches=100000),
            model_definition=packed.data,
            model_definition_name=packed.name,
        )
        return self.scheduler(owner).CreateExperiment(request, timeout=30).experiment.id

    def trial_of(self, exp_id: int) -> tuple[int, int]:
        with sqlite3.connect(self.cluster.workdir / "pedl.db") as db:
            trial_id, run_id = db.execute(
                "SELECT id, run_id FROM trials WHERE experiment_id = ? ORDER BY id LIMIT 1", (exp_id,)
            ).fetchone()
        return trial_id, run_id

    def trial_token(self, exp_id: int, grants: tuple[str, ...] = ()) -> str:
        trial_id, run_id = self.trial_of(exp_id)
        return trial_token.mint(self.secret, exp_id, trial_id, run_id, grants)

    def new_checkpoint(self, exp_id: int | None = None, caller: str = "cluster") -> str:
        exp_id = exp_id or self.exp_id
        trial_id = self.trial_of(exp_id)[0]
        return upload(self.store(caller), exp_id, trial_id).checkpoint.uuid


def upload(stub, exp_id: int, trial_id: int):  # type: ignore[no-untyped-def]
    header = checkpoint_store_pb2.UploadHeader(experiment_id=exp_id, trial_id=trial_id, total_batches=1)
    chunk = checkpoint_store_pb2.FileChunk(
        path="w.bin", data=b"weights", last=True, sha256=hashlib.sha256(b"weights").hexdigest()
    )
    requests = [
        checkpoint_store_pb2.UploadCheckpointRequest(header=header),
        checkpoint_store_pb2.UploadCheckpointRequest(chunk=chunk),
    ]
    return stub.UploadCheckpoint(iter(requests), timeout=30)


def _user(cluster: LocalCluster, name: str) -> str:
    stub = auth_pb2_grpc.AuthServiceStub(_channel(cluster.master, cluster.token))
    stub.CreateUser(auth_pb2.CreateUserRequest(username=name, password=name * 3), timeout=60)
    return login(cluster.master, name, name * 3)


@pytest.fixture(scope="module", params=[False, True], ids=["open-reads", "private-experiments"])
def world(request, tmp_path_factory) -> Iterator[World]:  # type: ignore[no-untyped-def]
    private = request.param
    tmp = tmp_path_factory.mktemp("authz")
    extra = ["--private-experiments"] if private else []
    # No agent: trials stay queued in their first run, which is all the tokens need.
    with local_cluster(tmp / "cluster", agents=0, scheduler_args=extra) as cluster:
        secret = cluster.secret_file.read_text().strip()
        tokens: dict[str, str | None] = {"none": None, "admin": cluster.token, "cluster": secret}
        tokens["owner"] = _user(cluster, "alice")
        tokens["other"] = _user(cluster, "bob")
        _user(cluster, "carol")
        w = World(cluster, tmp, private, secret, tokens)
        w.exp_id = w.new_experiment()
        w.trial_id = w.trial_of(w.exp_id)[0]
        w.uuid = w.new_checkpoint()
        tokens["trial"] = w.trial_token(w.exp_id)
        tokens["other_trial"] = w.trial_token(w.new_experiment("other"))
        ended = w.new_experiment()
        tokens["ended_trial"] = w.trial_token(ended)
        w.scheduler("admin").KillExperiment(
            scheduler_pb2.KillExperimentRequest(experiment_id=ended), timeout=30
        )
        try:
            yield w
        except BaseException:
            print(cluster.logs())
            raise


# ---- one call per method ------------------------------------------------------------------------


def _fresh_login(w: World, caller: str) -> str | None:
    """Logout ends the session it is given: users log out a session of their own made for it."""
    names = {"owner": "alice", "other": "bob", "admin": "admin"}
    if caller not in names:
        return w.tokens[caller]
    password = w.cluster.admin_password if caller == "admin" else names[caller] * 3
    return login(w.cluster.master, names[caller], password)


def _killed_experiment(w: World) -> int:
    exp_id = w.new_experiment()
    w.scheduler("admin").KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=exp_id), timeout=30)
    return exp_id


def _ended_checkpoint(w: World) -> str:
    """A checkpoint of the owner's killed experiment, stored and recorded as a trial's report would
    (no agent runs here): nothing needs it, so an allowed delete succeeds."""
    exp_id = w.new_experiment()
    trial_id = w.trial_of(exp_id)[0]
    stored = upload(w.store("cluster"), exp_id, trial_id).checkpoint
    w.scheduler("admin").KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=exp_id), timeout=30)
    with sqlite3.connect(w.cluster.workdir / "pedl.db", timeout=30) as db:
        db.execute(
            "INSERT INTO checkpoints (uuid, trial_id, step_id, total_batches, state, checkpoint_json,"
            " created_at, state_changed_at) VALUES (?, ?, 1, 1, 'COMPLETED', ?, '', '')",
            (stored.uuid, trial_id, json_format.MessageToJson(stored)),
        )
    return stored.uuid


def _paused_experiment(w: World) -> int:
    exp_id = w.new_experiment()
    w.scheduler("admin").PauseExperiment(
        scheduler_pb2.PauseExperimentRequest(experiment_id=exp_id), timeout=30
    )
    return exp_id


def _connect(w: World, caller: str) -> Any:
    stub = link_grpc.AgentLinkServiceStub(_channel(w.cluster.master, w.tokens[caller]))
    responses = stub.Connect(iter(()), timeout=5)
    return list(responses)


def _call(w: World, method: str, caller: str) -> Any:
    """Makes `caller` call `method` on a target an allowed call may change (fresh where it would)."""
    name = method.rsplit("/", 1)[-1]
    sp, ap, cp = scheduler_pb2, auth_pb2, checkpoint_store_pb2
    t = 30
    if method.startswith("/pedl.v1.HarnessService/"):
        return _channel(w.cluster.master, w.tokens[caller]).unary_unary(method)(b"", timeout=t)
    if method.startswith("/pedl.v1.AgentLinkService/"):
        return _connect(w, caller)
    if method.startswith("/pedl.v1.AuthService/"):
        a = w.auth(caller)
        if name == "Login":
            return a.Login(ap.LoginRequest(username="alice", password="alice" * 3), timeout=t)
        if name == "Logout":
            stub = auth_pb2_grpc.AuthServiceStub(_channel(w.cluster.master, _fresh_login(w, caller)))
            return stub.Logout(ap.LogoutRequest(), timeout=t)
        if name == "CreateUser":
            return a.CreateUser(
                ap.CreateUserRequest(username=f"u{next(w.counter)}", password="x" * 12), timeout=t
            )
        if name == "SetUserPassword":
            # Users change their own, giving the current one; others try carol's (a reset ends
            # every session of its user, and alice's token serves the rest of the table).
            if caller == "owner":
                request = ap.SetUserPasswordRequest(
                    username="alice", password="alice" * 3, current_password="alice" * 3
                )
            else:
                request = ap.SetUserPasswordRequest(username="carol", password="carol" * 3)
            return a.SetUserPassword(request, timeout=t)
        if name == "SetUserDisplayName":
            target = "alice" if caller == "owner" else "carol"
            request = ap.SetUserDisplayNameRequest(username=target, display_name=f"{caller} named")
            return a.SetUserDisplayName(request, timeout=t)
        if name == "SetUserActive":
            return a.SetUserActive(ap.SetUserActiveRequest(username="bob", active=True), timeout=t)
        if name == "LinkAgentUser":
            link = ap.AgentUser(uid=1001, gid=1001)
            return a.LinkAgentUser(ap.LinkAgentUserRequest(username="bob", agent_user=link), timeout=t)
        if name == "RenameUser":  # to the name carol has: allowed, and the table's users stay
            return a.RenameUser(ap.RenameUserRequest(username="carol", new_username="carol"), timeout=t)
        if name == "SetUserAdmin":  # bob stays what he is
            return a.SetUserAdmin(ap.SetUserAdminRequest(username="bob", admin=False), timeout=t)
        if name == "ValidateToken":
            return a.ValidateToken(ap.ValidateTokenRequest(token=w.tokens["owner"] or ""), timeout=t)
        if name == "Authorize":
            request = ap.AuthorizeRequest(
                token=w.tokens["owner"] or "", action="read", experiment_id=w.exp_id
            )
            return a.Authorize(request, timeout=t)
        return getattr(a, name)(getattr(ap, f"{name}Request")(), timeout=t)
    if method.startswith("/pedl.v1.SchedulerService/"):
        s = w.scheduler(caller)
        by_experiment = {
            "GetExperiment": (w.exp_id, sp.GetExperimentRequest),
            "WaitExperiment": (w.exp_id, sp.WaitExperimentRequest),  # no timeout: answers at once
            "GetModelDefinition": (w.exp_id, sp.GetModelDefinitionRequest),
            "ListTrialDetails": (w.exp_id, sp.ListTrialDetailsRequest),
        }
        if name in by_experiment:
            exp_id, request_type = by_experiment[name]
            return getattr(s, name)(request_type(experiment_id=exp_id), timeout=t)
        if name == "GetTrial":
            return s.GetTrial(sp.GetTrialRequest(trial_id=w.trial_id), timeout=t)
        if name == "GetMetrics":
            return list(s.GetMetrics(sp.GetMetricsRequest(experiment_id=w.exp_id), timeout=t))
        if name == "GetTrialLogs":
            return list(s.GetTrialLogs(sp.GetTrialLogsRequest(trial_id=w.trial_id), timeout=t))
        if name == "CreateExperiment":
            packed = pack(write_tiny_model(w.tmp / f"created{next(w.counter)}"))
            request = sp.CreateExperimentRequest(
                config_yaml=tiny_config(max_batches=100),
                model_definition=packed.data,
                model_definition_name=packed.name,
            )
            return s.CreateExperiment(request, timeout=t)
        if name == "UploadExperiment":
            packed = pack(write_tiny_model(w.tmp / f"uploaded{next(w.counter)}"))
            parts = [
                sp.UploadExperimentRequest(
                    config_yaml=tiny_config(max_batches=100),
                    model_definition_name=packed.name,
                    model_definition=packed.data,
                )
            ]
            return s.UploadExperiment(iter(parts), timeout=t)
        if name == "DeleteCheckpoints":
            return s.DeleteCheckpoints(
                sp.DeleteCheckpointsRequest(checkpoint_uuids=[_ended_checkpoint(w)]), timeout=t
            )
        if name == "RemoveCheckpointFiles":
            request = sp.SchedulerServiceRemoveCheckpointFilesRequest(
                checkpoint_uuids=[_ended_checkpoint(w)], globs=["nothing-*"]
            )
            return s.RemoveCheckpointFiles(request, timeout=t)
        if name == "SetCheckpointMetadata":
            request = sp.SetCheckpointMetadataRequest(
                checkpoint_uuid=_ended_checkpoint(w), metadata_json='{"k": "v"}'
            )
            return s.SetCheckpointMetadata(request, timeout=t)
        if name == "ReportTrialMetrics":
            metrics = json_format.ParseDict({"loss": 1.0}, struct_pb2.Struct())
            request = sp.ReportTrialMetricsRequest(
                trial_id=w.trial_id,
                kind=sp.METRIC_KIND_TRAINING,
                steps_completed=next(w.counter),
                metrics=metrics,
            )
            return s.ReportTrialMetrics(request, timeout=t)
        if name == "KillTrial":
            trial_id = w.trial_of(w.new_experiment())[0]
            return s.KillTrial(sp.KillTrialRequest(trial_id=trial_id), timeout=t)
        if name in ("KillExperiment", "PauseExperiment"):
            return getattr(s, name)(
                getattr(sp, f"{name}Request")(experiment_id=w.new_experiment()), timeout=t
            )
        if name == "ActivateExperiment":
            return s.ActivateExperiment(
                sp.ActivateExperimentRequest(experiment_id=_paused_experiment(w)), timeout=t
            )
        if name == "PatchExperiment":
            request = sp.PatchExperimentRequest(experiment_id=w.new_experiment(), description="patched")
            return s.PatchExperiment(request, timeout=t)
        if name == "DeleteExperiment":
            return s.DeleteExperiment(
                sp.DeleteExperimentRequest(experiment_id=_killed_experiment(w)), timeout=t
            )
        if name == "SetAgentEnabled":
            return s.SetAgentEnabled(
                sp.SetAgentEnabledRequest(agent_id="no-such-agent", enabled=True), timeout=t
            )
        return getattr(s, name)(getattr(sp, f"{name}Request")(), timeout=t)
    c = w.store(caller)
    header = cp.UploadHeader(experiment_id=w.exp_id, trial_id=w.trial_id, total_batches=2)
    if name == "UploadCheckpoint":
        return upload(c, w.exp_id, w.trial_id)
    if name == "BeginUpload":
        files = [cp.PlannedFile(path="w.bin", size=7)]
        return c.BeginUpload(cp.BeginUploadRequest(header=header, files=files), timeout=t)
    if name in ("FinishUpload", "AbortUpload"):
        return getattr(c, name)(getattr(cp, f"{name}Request")(uuid="no-such-upload"), timeout=t)
    if name == "DownloadCheckpoint":
        return list(c.DownloadCheckpoint(cp.DownloadCheckpointRequest(uuid=w.uuid), timeout=t))
    if name == "GetCheckpoint":
        return c.GetCheckpoint(cp.GetCheckpointRequest(uuid=w.uuid), timeout=t)
    if name == "ListCheckpoints":
        request = cp.ListCheckpointsRequest(experiment_id=w.exp_id, trial_id=w.trial_id)
        return c.ListCheckpoints(request, timeout=t)
    if name == "DeleteCheckpoint":
        return c.DeleteCheckpoint(cp.DeleteCheckpointRequest(uuid=w.new_checkpoint()), timeout=t)
    if name == "RemoveCheckpointFiles":
        request = cp.RemoveCheckpointFilesRequest(uuid=w.new_checkpoint(), globs=["nothing-*"])
        return c.RemoveCheckpointFiles(request, timeout=t)
    if name == "UploadTensorboardFiles":
        chunk = cp.FileChunk(path="events.out.tfevents.1", data=b"ev", last=True)
        chunk.sha256 = hashlib.sha256(b"ev").hexdigest()
        requests = [
            cp.UploadTensorboardFilesRequest(
                header=cp.TensorboardFilesHeader(experiment_id=w.exp_id, trial_id=w.trial_id)
            ),
            cp.UploadTensorboardFilesRequest(chunk=chunk),
        ]
        return c.UploadTensorboardFiles(iter(requests), timeout=t)
    if name == "ListTensorboardFiles":
        request = cp.ListTensorboardFilesRequest(experiment_id=w.exp_id, trial_id=w.trial_id)
        return c.ListTensorboardFiles(request, timeout=t)
    if name == "DownloadTensorboardFile":
        request = cp.DownloadTensorboardFileRequest(experiment_id=w.exp_id, trial_id=w.trial_id, path="none")
        return list(c.DownloadTensorboardFile(request, timeout=t))
    if name == "DeleteTensorboardFiles":  # an experiment that has none: nothing of the others' goes
        return c.DeleteTensorboardFiles(cp.DeleteTensorboardFilesRequest(experiment_id=999_999), timeout=t)
    raise AssertionError(f"no call written for {method}")


def outcome(call: Callable[[], Any]) -> Any:
    try:
        call()
    except grpc.RpcError as e:
        return e.code()
    return OK


def test_every_rpc_for_every_caller(world: World) -> None:
    table = expected(world.private)
    wrong = []
    for method in all_methods():
        for caller in CALLERS:
            want = table[method][caller]
            got = outcome(lambda method=method, caller=caller: _call(world, method, caller))
            if want == ALLOWED:
                ok = got not in (DENIED, UNAUTH)
            else:
                ok = got == want
            if not ok:
                wrong.append(f"{method} as {caller}: expected {want}, got {got}")
    assert not wrong, "\n".join(wrong)


def test_private_lists_show_only_ones_own(world: World) -> None:
    """Lists are filtered rather than refused: bob sees all of alice's only without the flag."""
    bobs = world.scheduler("other").ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30)
    owners = {e.owner for e in bobs.experiments}
    if world.private:
        assert owners == {"bob"}, owners
    else:
        assert {"alice", "bob", "admin", ""} <= owners, owners  # "": made with the cluster secret
    admins = world.scheduler("admin").ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30)
    assert {"alice", "bob", "admin", ""} <= {e.owner for e in admins.experiments}
    listing = world.store("other").ListCheckpoints(checkpoint_store_pb2.ListCheckpointsRequest(), timeout=30)
    alices = [c for c in listing.checkpoints if c.experiment_id == world.exp_id]
    assert (alices == []) if world.private else alices


def test_bob_cannot_delete_alices_checkpoint_and_it_stays(world: World) -> None:
    """The issue's report: another user's `checkpoint delete` is refused and nothing is removed."""
    uuid = _ended_checkpoint(world)  # recorded by the scheduler, so only ownership stands in the way
    request = checkpoint_store_pb2.DeleteCheckpointRequest(uuid=uuid)
    with pytest.raises(grpc.RpcError) as info:
        world.store("other").DeleteCheckpoint(request, timeout=30)
    assert info.value.code() == DENIED
    assert "through the scheduler" in (info.value.details() or "")
    through_scheduler = scheduler_pb2.DeleteCheckpointsRequest(checkpoint_uuids=[uuid])
    with pytest.raises(grpc.RpcError) as info:
        world.scheduler("other").DeleteCheckpoints(through_scheduler, timeout=30)
    assert info.value.code() == DENIED
    assert "only its owner or an admin" in (info.value.details() or "")
    get = checkpoint_store_pb2.GetCheckpointRequest(uuid=uuid)
    assert world.store("owner").GetCheckpoint(get, timeout=30).checkpoint.uuid == uuid


def test_a_trial_reads_the_checkpoint_it_was_granted_and_no_other(world: World) -> None:
    """A PBT child or warm start is granted its parent's checkpoint at dispatch, by name."""
    other_exp = world.new_experiment("other")
    granted = world.trial_token(other_exp, grants=(world.uuid,))
    stub = checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(
        _channel(world.cluster.store.address, granted)
    )
    assert stub.GetCheckpoint(checkpoint_store_pb2.GetCheckpointRequest(uuid=world.uuid), timeout=30)
    another = world.new_checkpoint()
    with pytest.raises(grpc.RpcError) as info:
        stub.GetCheckpoint(checkpoint_store_pb2.GetCheckpointRequest(uuid=another), timeout=30)
    assert info.value.code() == DENIED
    # Nor may it store into the experiment it reads from.
    with pytest.raises(grpc.RpcError) as info:
        upload(stub, world.exp_id, world.trial_id)
    assert info.value.code() == DENIED
