"""Renaming a user through Determined's `PATCH /api/v1/users/{id}` (what `det user rename` and
`det user edit --username` send), against a real scheduler: the user keeps their id, their
experiments and their session; the old name logs nobody in; a taken name and a non-admin caller
are refused in Determined's error shape with nothing changed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_auth import create_user

from pedl import _grpc
from pedl.context import pack
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from pedl_webui.app import build_app
from pedl_webui.gateway import Gateway
from pedl_webui.serve import Server
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster
from support.rest import rest_call

pytestmark = pytest.mark.integration


@dataclass
class Setup:
    url: str
    tokens: dict[str, str]
    exp_id: int


def http(setup: Setup, who: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return rest_call(setup.url, setup.tokens[who] if who else None, method, path, body)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("rest-rename")
    with local_cluster(tmp / "cluster", agents=0) as cluster:
        tokens = {name: create_user(cluster, name) for name in ("alice", "bob")}
        tokens["admin"] = cluster.token
        packed = pack(write_tiny_model(Path(tmp) / "model"))
        with _grpc.channel(cluster.master) as channel:
            create = scheduler_pb2.CreateExperimentRequest(
                config_yaml=tiny_config(max_batches=1000),
                model_definition=packed.data,
                model_definition_name=packed.name,
            )
            alice = (("authorization", f"Bearer {tokens['alice']}"),)
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            exp_id = scheduler.CreateExperiment(create, timeout=60, metadata=alice).experiment.id
        gateway = Gateway(cluster.master)
        server = Server(build_app(gateway), "127.0.0.1", 0)
        thread = server.start_thread()
        try:
            yield Setup(f"http://127.0.0.1:{server.port}", tokens, exp_id)
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            server.stop()
            thread.join(10)
            gateway.close()


def _user(setup: Setup, name: str) -> dict[str, Any]:
    status, answer = http(setup, "admin", "GET", f"/api/v1/users/{name}/by-username")
    assert status == 200, answer
    return answer["user"]


def test_a_renamed_user_keeps_id_experiments_and_session_and_only_admins_rename(setup: Setup) -> None:
    alice, bob = _user(setup, "alice"), _user(setup, "bob")
    assert alice["id"] != bob["id"]

    # Not an admin: refused, in Determined's error shape, nothing changed.
    status, answer = http(setup, "bob", "PATCH", f"/api/v1/users/{alice['id']}", {"username": "al"})
    assert status == 403 and answer["message"] == "RenameUser needs an admin", answer
    # A name in use: refused in one line, nothing changed.
    status, answer = http(setup, "admin", "PATCH", f"/api/v1/users/{alice['id']}", {"username": "bob"})
    assert (status, answer["message"]) == (409, "cannot rename 'alice': user 'bob' already exists")
    status, answer = http(setup, "admin", "PATCH", f"/api/v1/users/{alice['id']}", {"username": " x "})
    assert status == 400 and "invalid username ' x ': it must have 2 to 255" in answer["message"]
    status, answer = http(setup, "admin", "PATCH", f"/api/v1/users/{alice['id']}", {"username": "ADMIN"})
    assert status == 400 and "only an admin may be called 'admin'" in answer["message"]
    assert _user(setup, "alice")["id"] == alice["id"]

    status, answer = http(
        setup, "admin", "PATCH", f"/api/v1/users/{alice['id']}", {"username": "alice.smith", "remote": False}
    )
    assert status == 200 and answer["user"]["username"] == "alice.smith", answer
    assert answer["user"]["id"] == alice["id"]
    status, answer = http(setup, "admin", "GET", f"/api/v1/users/{alice['id']}")
    assert answer["user"]["username"] == "alice.smith"
    assert _user(setup, "bob")["id"] == bob["id"]  # ids do not shift with names

    # Her session goes on, under the new name, and her experiment is still hers to change.
    status, answer = http(setup, "alice", "GET", "/api/v1/me")
    assert (status, answer["user"]["username"]) == (200, "alice.smith")
    status, answer = http(setup, "alice", "GET", f"/api/v1/experiments/{setup.exp_id}")
    assert status == 200 and answer["experiment"]["username"] == "alice.smith"
    status, answer = http(setup, "alice", "PATCH", f"/api/v1/experiments/{setup.exp_id}", {"notes": "mine"})
    assert status == 200, answer
    status, answer = http(setup, "bob", "PATCH", f"/api/v1/experiments/{setup.exp_id}", {"notes": "bob's"})
    assert status == 403 and "alice.smith" in answer["message"], answer
    status, answer = http(setup, "alice", "GET", "/api/v1/experiments?users=alice.smith")
    assert [e["id"] for e in answer["experiments"]] == [setup.exp_id]

    # The new name logs in with her password; the old one logs nobody in.
    status, answer = http(
        setup, "", "POST", "/api/v1/auth/login", {"username": "alice.smith", "password": "alice" * 3}
    )
    assert status == 200 and answer["user"]["username"] == "alice.smith"
    status, answer = http(
        setup, "", "POST", "/api/v1/auth/login", {"username": "alice", "password": "alice" * 3}
    )
    assert status == 401

    # Any printable ASCII, as Determined's test_change_username renames to `rename-user-$64`.
    status, answer = http(
        setup, "admin", "PATCH", f"/api/v1/users/{alice['id']}", {"username": " rename-user-$64 "}
    )
    assert status == 200 and answer["user"]["username"] == "rename-user-$64", answer
    assert _user(setup, "rename-user-%2464")["id"] == alice["id"]


def test_admins_grant_and_take_admin_rights_but_not_their_own(setup: Setup) -> None:
    bob, admin = _user(setup, "bob"), _user(setup, "admin")
    status, answer = http(setup, "bob", "PATCH", f"/api/v1/users/{bob['id']}", {"admin": True})
    assert status == 403 and answer["message"] == "SetUserAdmin needs an admin", answer

    # As `det user edit bob --admin=true --active=true --remote=false` sends it.
    edit = {"admin": True, "active": True, "remote": False, "displayName": "Bob B"}
    status, answer = http(setup, "admin", "PATCH", f"/api/v1/users/{bob['id']}", edit)
    assert status == 200 and answer["user"]["admin"] and answer["user"]["displayName"] == "Bob B", answer
    assert http(setup, "bob", "GET", "/api/v1/master/config")[0] == 200  # his session is an admin's now
    status, answer = http(setup, "admin", "PATCH", f"/api/v1/users/{bob['id']}", {"admin": False})
    assert status == 200 and not answer["user"]["admin"]
    assert http(setup, "bob", "GET", "/api/v1/master/config")[0] == 403

    status, answer = http(setup, "admin", "PATCH", f"/api/v1/users/{admin['id']}", {"admin": False})
    assert (status, answer["message"]) == (409, "an admin cannot take away their own admin rights")
    assert _user(setup, "admin")["admin"]
