"""The web UI's HTTP rules, against a stand-in for the scheduler: sessions, refusals, static files."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from pedl.v1 import auth_pb2, common_pb2, scheduler_pb2
from pedl_webui.app import build_app
from pedl_webui.gateway import GatewayError
from pedl_webui.serve import Server


class StandInGateway:
    """Answers as the scheduler would for user "ann" (token "tok-ann"), who owns experiment 1."""

    def login(
        self, username: str, password: str, hashed: bool = False, browser: str = ""
    ) -> auth_pb2.LoginResponse:
        assert browser == "127.0.0.1"  # the scheduler limits failed logins per browser
        if (username, password) != ("ann", "pw"):
            raise GatewayError(401, "wrong username or password")
        return auth_pb2.LoginResponse(token="tok-ann", user=auth_pb2.User(username="ann"))

    def whoami(self, token: str) -> auth_pb2.User | None:
        return auth_pb2.User(username="ann") if token == "tok-ann" else None

    def logout(self, token: str) -> None:
        pass

    def call(self, token: str, method: str, request: Any) -> Any:
        if token != "tok-ann":
            raise GatewayError(401, "invalid token")
        if getattr(request, "experiment_id", 1) != 1 or getattr(request, "trial_id", 1) != 1:
            raise GatewayError(404, "not found")
        if method == "KillExperiment":
            exp = scheduler_pb2.Experiment(id=1, state=common_pb2.EXPERIMENT_STATE_CANCELED)
            return scheduler_pb2.KillExperimentResponse(experiment=exp)
        exp = scheduler_pb2.Experiment(id=1, state=common_pb2.EXPERIMENT_STATE_ACTIVE, config_yaml="a: 1\n")
        return scheduler_pb2.GetExperimentResponse(experiment=exp)


@contextlib.contextmanager
def serving(gateway: Any) -> Iterator[str]:
    """The web app on a free port of 127.0.0.1 in front of `gateway`; its URL."""
    server = Server(build_app(gateway), "127.0.0.1", 0)
    thread = server.start_thread()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()
        thread.join(10)


@pytest.fixture
def url() -> Iterator[str]:
    with serving(StandInGateway()) as address:
        yield address


def request(url: str, path: str, body: Any = None, cookie: str = "", content_type: str = "application/json"):  # noqa: ANN201
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": content_type} if data is not None else {}
    if cookie:
        headers["Cookie"] = cookie
    req = urllib.request.Request(url + path, data=data, headers=headers, method="POST" if data else "GET")
    opener = urllib.request.build_opener(NoRedirect)
    try:
        response = opener.open(req, timeout=10)
        return response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:  # noqa: ANN401
        return None


def test_login_sets_an_httponly_strict_cookie_and_a_wrong_password_is_refused(url: str) -> None:
    status, headers, _ = request(url, "/api/login", {"username": "ann", "password": "pw"})
    assert status == 200
    assert headers["Set-Cookie"] == "pedl_session=tok-ann; Path=/; HttpOnly; SameSite=Strict"
    status, _, body = request(url, "/api/login", {"username": "ann", "password": "nope"})
    assert status == 401 and json.loads(body)["error"] == "wrong username or password"


@pytest.mark.parametrize(
    ("sent", "next_page"),
    [
        ("/experiments/1", "/experiments/1"),
        ("/\\evil.example/", "/experiments"),
        ("//evil.example", "/experiments"),
    ],
)
def test_login_answers_where_to_go_next_only_on_this_site(url: str, sent: str, next_page: str) -> None:
    status, _, body = request(url, "/api/login", {"username": "ann", "password": "pw", "next": sent})
    assert status == 200 and json.loads(body)["next"] == next_page


def test_without_a_session_pages_redirect_to_login_and_the_api_answers_401(url: str) -> None:
    status, headers, _ = request(url, "/experiments/1")
    assert status == 303 and headers["Location"] == "/login?next=/experiments/1"
    assert request(url, "/api/experiments")[0] == 401
    assert request(url, "/api/experiments/1/kill", {}, cookie="pedl_session=stolen")[0] == 401


def test_actions_need_a_json_body_so_no_other_site_can_post_a_form(url: str) -> None:
    cookie = "pedl_session=tok-ann"
    status, _, _ = request(url, "/api/experiments/1/kill", "x", cookie=cookie, content_type="text/plain")
    assert status == 415
    status, _, body = request(url, "/api/experiments/1/kill", {}, cookie=cookie)
    assert status == 200 and json.loads(body) == {"id": 1, "state": "CANCELED"}


def test_unknown_ids_and_paths_are_404_pages_and_static_files_stay_in_their_folder(url: str) -> None:
    cookie = "pedl_session=tok-ann"
    for path in ("/experiments/2", "/trials/7", "/experiments/x", "/elsewhere"):
        status, headers, body = request(url, path, cookie=cookie)
        assert status == 404 and b"Not found" in body and headers["Content-Type"].startswith("text/html"), (
            path
        )
    assert request(url, "/experiments/1", cookie=cookie)[0] == 200
    for path in ("/static/../server.py", "/static/%2e%2e/server.py", "/static/experiment.html"):
        assert request(url, path)[0] == 404, path
    status, headers, _ = request(url, "/static/vendor/uPlot.iife.min.js")
    assert status == 200 and "default-src 'self'" in headers["Content-Security-Policy"]


class StreamingGateway(StandInGateway):
    """Also answers a GetMetrics stream: one reply with a custom group's rows, then the end."""

    def __init__(self) -> None:
        self.streamed: list[Any] = []

    def stream(self, token: str, method: str, request: Any) -> Any:
        self.streamed.append(request)
        series = scheduler_pb2.MetricSeries(
            trial_id=1, group=request.group, total_batches=[20], metrics_json=['{"fps": 9.5}'], end_time=["t"]
        )

        class Call:
            def __iter__(self) -> Iterator[Any]:
                yield scheduler_pb2.GetMetricsResponse(series=[series], caught_up=True)

            def cancel(self) -> None:
                pass

        return Call()


def test_a_trials_custom_group_streams_on_its_own_and_a_bad_name_is_400() -> None:
    gateway = StreamingGateway()
    with serving(gateway) as address:
        cookie = "pedl_session=tok-ann"
        status, _, body = request(address, "/api/trials/1/metrics?group=inf%25er%20en%2Fce", cookie=cookie)
        assert status == 200
        data = json.loads(body.decode().split("data: ", 1)[1].split("\n", 1)[0])
        assert data == {"series": [[1, "g", [20], [{"fps": 9.5}]]], "caught_up": True}
        assert "event: end" in body.decode()
        assert [(r.trial_id, r.group, r.follow) for r in gateway.streamed] == [(1, "inf%er en/ce", True)]
        status, _, body = request(address, "/api/trials/1/metrics?group=a.b", cookie=cookie)
        assert status == 400 and b"a metric group is 1-64 characters, no dot" in body
        assert len(gateway.streamed) == 1  # refused before the scheduler is asked
