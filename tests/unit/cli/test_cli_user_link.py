"""`pedl user link-with-agent-user` and `pedl user rename`, as Determined's `det user ...`: what
they send, uid/gid 0 refused before anything is sent, and a taken name refused in one line."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from pedl.cli.main import main
from pedl.v1 import auth_pb2, auth_pb2_grpc


class _Auth(auth_pb2_grpc.AuthServiceServicer):
    def __init__(self) -> None:
        self.links: list[auth_pb2.LinkAgentUserRequest] = []
        self.renames: list[auth_pb2.RenameUserRequest] = []

    def LinkAgentUser(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        self.links.append(request)
        return auth_pb2.LinkAgentUserResponse()

    def RenameUser(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        if request.new_username == "taken":
            context.abort(grpc.StatusCode.ALREADY_EXISTS, "cannot rename 'bob': user 'taken' already exists")
        self.renames.append(request)
        return auth_pb2.RenameUserResponse(user=auth_pb2.User(username=request.new_username, id=2))


@pytest.fixture
def auth() -> Iterator[tuple[_Auth, str]]:
    servicer = _Auth()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    auth_pb2_grpc.add_AuthServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def test_link_sends_the_unix_user_and_group(
    auth: tuple[_Auth, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = auth
    args = ["--agent-uid", "1001", "--agent-gid", "1002", "--agent-user", "bob", "--agent-group", "lab"]
    assert main(["--master", address, "user", "link-with-agent-user", "bob", *args]) == 0
    (sent,) = servicer.links
    assert sent.username == "bob" and sent.agent_user == auth_pb2.AgentUser(
        uid=1001, gid=1002, user="bob", group="lab"
    )
    assert "uid 1001, gid 1002" in capsys.readouterr().out


def test_root_is_refused_before_anything_is_sent(
    auth: tuple[_Auth, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = auth
    code = main(
        ["--master", address, "user", "link-with-agent-user", "bob", "--agent-uid", "0", "--agent-gid", "5"]
    )
    assert code == 2 and servicer.links == []
    err = capsys.readouterr().err
    assert "never run as root" in err and len(err.strip().splitlines()) == 1


def test_rename_sends_both_names_and_a_taken_name_is_one_line(
    auth: tuple[_Auth, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = auth
    assert main(["--master", address, "user", "rename", "bob", "robert"]) == 0
    assert [(r.username, r.new_username) for r in servicer.renames] == [("bob", "robert")]
    assert "Renamed user bob to robert" in capsys.readouterr().out
    assert main(["--master", address, "user", "rename", "bob", "taken"]) != 0
    err = capsys.readouterr().err
    assert "user 'taken' already exists" in err and len(err.strip().splitlines()) == 1
