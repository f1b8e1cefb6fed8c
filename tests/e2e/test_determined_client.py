"""Determined's own client, installed from PyPI into a virtualenv of its own
(scripts/install-determined-client, cached under .cache/), against one real `pedl cluster up`:
its `det` and its Python SDK run a user's everyday workflow unchanged through the REST API at the
DET_MASTER the cluster prints; a second, non-admin user is refused where Determined refuses."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import ROOT, User, cluster_up
from tests.e2e.test_det_verbatim import GRID, LONG
from tests.support.models import write_tiny_model

pytestmark = pytest.mark.e2e
# One trial of 20 batches: the SDK's workflow needs a validation and a checkpoint, not a search.
SINGLE = LONG.replace("batches: 1000000", "batches: 20")
SDK_WORKFLOW = """
import sys
from determined.experimental import client
client.login(master=sys.argv[1], user="admin", password=sys.argv[2])
exp = client.create_experiment(config=sys.argv[3], model_dir=sys.argv[4])
state = exp.wait(interval=1)
trials = exp.list_trials()
validations = list(trials[0].iter_metrics("validation"))
training = list(trials[0].iter_metrics("training"))
top = exp.list_checkpoints(max_results=1)[0]
path = top.download(sys.argv[5])
print(json.dumps({"id": exp.id, "state": state.name, "trials": [t.id for t in trials],
                  "validations": [v.metrics for v in validations], "top": top.uuid, "path": path,
                  "runs": sorted({m.trial_run_id for m in validations + training}),
                  "batch_metrics": [m.batch_metrics for m in training]}))
""".replace("import sys", "import json, sys", 1)


class Det:
    """Determined's `det` (and python) from its own venv, as a Determined user on their laptop."""

    def __init__(self, bin_dir: Path, master: str, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.bin = bin_dir
        self.env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(home),
            "DET_MASTER": master,
            "XDG_CACHE_HOME": str(home / ".cache"),
        }

    def run(self, *args: str, timeout: float = 120, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bin / "det"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )

    def ok(self, *args: str, timeout: float = 120) -> str:
        r = self.run(*args, timeout=timeout)
        assert r.returncode == 0, f"det {args} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
        return r.stdout

    def login(self, username: str, password: str) -> None:
        r = self.run("user", "login", username, input=password + "\n")
        assert r.returncode == 0, r.stderr


def install(version: str) -> Path:
    r = subprocess.run(
        [str(ROOT / "scripts" / "install-determined-client"), version],
        capture_output=True, text=True, timeout=1200, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, f"installing determined=={version} from PyPI failed:\n{r.stderr[-3000:]}"
    return Path(r.stdout.strip().splitlines()[-1])


class Cluster:
    def __init__(self, user: User, det_master: str, admin_password: str, tmp: Path) -> None:
        self.user, self.det_master, self.admin_password, self.tmp = user, det_master, admin_password, tmp


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("determined-client")
    user, up = cluster_up(tmp / "pedl-home", "--agents", "1", "--slots-per-agent", "2")
    try:
        det_master = re.search(r"export DET_MASTER=(\S+)", up).group(1)  # type: ignore[union-attr]
        password = (tmp / "pedl-home" / "cluster" / "admin-password").read_text().strip()
        write_tiny_model(tmp / "model")
        (tmp / "grid.yaml").write_text(textwrap.dedent(GRID))
        (tmp / "long.yaml").write_text(textwrap.dedent(LONG))
        (tmp / "single.yaml").write_text(textwrap.dedent(SINGLE))
        yield Cluster(user, det_master, password, tmp)
    finally:
        down = user.run("pedl", "cluster", "down")
        assert down.returncode == 0, down.stderr


@pytest.fixture(scope="module")
def det(cluster: Cluster) -> Det:
    d = Det(install("0.38.1"), cluster.det_master, cluster.tmp / "det-home")
    d.login("admin", cluster.admin_password)
    return d


def test_login_whoami_master_info_agents_and_slots(det: Det) -> None:
    assert "You are logged in as user 'admin'" in det.ok("user", "whoami")
    info = det.ok("master", "info")
    assert re.search(r"^version: 0\.38\.1$", info, re.M), info
    agents = det.ok("agent", "list")
    assert re.search(r"agent-1\s+\|.*\|\s+2\s+\|", agents), agents
    slots = det.ok("slot", "list")
    assert len(re.findall(r"agent-1\s+\|\s+default", slots)) == 2, slots
    notebooks = det.run("notebook", "list")
    assert notebooks.returncode != 0 and "pedl has no notebooks" in notebooks.stdout + notebooks.stderr


def test_everyday_experiment_workflow_through_det(det: Det, cluster: Cluster) -> None:
    out = det.ok(
        "e", "create", str(cluster.tmp / "grid.yaml"), str(cluster.tmp / "model"), "--follow", timeout=600
    )
    exp = re.search(r"Created experiment (\d+)", out).group(1)  # type: ignore[union-attr]
    assert "workload completed" in out and "Trial log stream ended" in out, out
    assert re.search(rf"^\s+{exp} \| admin .*\| COMPLETED", det.ok("e", "list"), re.M)
    assert "COMPLETED" in det.ok("e", "describe", exp)
    trials = re.findall(r"^\s+(\d+) \| COMPLETED", det.ok("e", "lt", exp), re.M)
    assert len(trials) == 2, trials
    checkpoints = det.ok("e", "lc", exp)
    uuid = re.search(r"([0-9a-f]{8}-[0-9a-f-]{27})", checkpoints).group(1)  # type: ignore[union-attr]
    logs = det.ok("t", "logs", trials[0], "-f")
    assert "WORKLOAD_KIND_CHECKPOINT_MODEL" in logs
    tail = det.ok("t", "logs", trials[0], "--tail", "2")
    assert len([line for line in tail.splitlines() if line.startswith("{")]) == 2, tail
    target = cluster.tmp / "downloaded"
    det.ok("checkpoint", "download", uuid, "-o", str(target))
    assert (target / "model_state_dict.pt").is_file() and (target / "metadata.json").is_file()
    det.ok("e", "set", "description", exp, "grid, from Determined's det")
    det.ok("e", "label", "add", exp, "determined")
    described = json.dumps(json.loads(det.ok("e", "describe", exp, "--json")))
    assert '"description": "grid, from Determined\'s det"' in described, described[:2000]
    assert '"labels": ["determined"]' in described, described[:2000]


def test_pause_activate_kill_and_a_second_user_is_refused_where_determined_refuses(
    det: Det, cluster: Cluster
) -> None:
    out = det.ok("e", "create", str(cluster.tmp / "long.yaml"), str(cluster.tmp / "model"), "--paused")
    exp = re.search(r"Created experiment (\d+)", out).group(1)  # type: ignore[union-attr]
    assert re.search(rf"^\s+{exp} \|.*\| PAUSED", det.ok("e", "list"), re.M)
    det.ok("e", "activate", exp)
    assert re.search(rf"^\s+{exp} \|.*\| ACTIVE", det.ok("e", "list"), re.M)
    # One experiment, as Determined answers it: QUEUED until a trial of it runs on an agent, then RUNNING.
    seen = _experiment_states_until(cluster, exp, "STATE_RUNNING")
    assert seen[-1] == "STATE_RUNNING" and set(seen) <= {"STATE_QUEUED", "STATE_RUNNING"}, seen
    det.ok("user", "create", "bob", "--password", "Bob-passw0rd")
    bob = Det(det.bin, cluster.det_master, cluster.tmp / "bob-home")
    bob.login("bob", "Bob-passw0rd")
    assert "You are logged in as user 'bob'" in bob.ok("user", "whoami")
    assert re.search(rf"^\s+{exp} \| admin", bob.ok("e", "list", "--all"), re.M)  # everyone sees them
    for refused in (
        ("e", "kill", exp),
        ("e", "pause", exp),
        ("user", "create", "eve", "--password", "Eve-passw0rd"),
    ):
        r = bob.run(*refused)
        assert r.returncode != 0, (refused, r.stdout)
        assert "admin" in (r.stdout + r.stderr).lower() or "owner" in (r.stdout + r.stderr).lower(), r.stderr
    det.ok("e", "pause", exp)
    det.ok("e", "kill", exp)
    assert re.search(rf"^\s+{exp} \|.*\| (CANCELED|STOPPING_CANCELED)", det.ok("e", "list"), re.M)
    bad = subprocess.run(
        [str(det.bin / "det"), "user", "login", "bob"], env=bob.env, input="wrong\n",
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode != 0


def test_det_job_list_shows_a_running_experiment_and_its_owner_changes_its_weight(
    det: Det, cluster: Cluster
) -> None:
    """`det job list`: a running experiment is a job holding its one slot; its owner changes its
    weight with `det job update`, another user may not, and a queue move is refused in one line;
    pedl's own CLI reads the same queue over gRPC and updates it the same way."""
    out = det.ok("e", "create", str(cluster.tmp / "long.yaml"), str(cluster.tmp / "model"))
    exp = re.search(r"Created experiment (\d+)", out).group(1)  # type: ignore[union-attr]
    try:
        assert _experiment_states_until(cluster, exp, "STATE_RUNNING")[-1] == "STATE_RUNNING"
        job = f"experiment-{exp}"
        listed = det.ok("job", "list")
        assert re.search(rf"\| {job} +\| TYPE_EXPERIMENT .*\| 1/1 .*\| STATE_SCHEDULED .*\| admin", listed), (
            listed
        )
        det.ok("job", "update", job, "--weight", "3")
        listed = det.ok("job", "list")
        assert re.search(rf"\| {job} +\|[^|]*\|[^|]*\| +3(\.0)? \|", listed), listed
        moved = det.run("job", "update", job, "--resource-pool", "elsewhere")
        assert moved.returncode != 0 and "weighted fair share" in moved.stderr, moved.stderr
        listed = cluster.user.ok("pedl", "job", "list")
        assert re.search(rf"^\d+ +{job} +EXPERIMENT .* 3 .* 1/1 +SCHEDULED +admin$", listed, re.M), listed
        assert (
            cluster.user.ok("pedl", "job", "update-batch", f"{job}.weight=2").strip()
            == f"Job {job}: weight 2"
        )
        det.ok("user", "create", "joan", "--password", "Joan-passw0rd")
        joan = Det(det.bin, cluster.det_master, cluster.tmp / "joan-home")
        joan.login("joan", "Joan-passw0rd")
        refused = joan.run("job", "update", job, "--weight", "5")
        assert refused.returncode != 0, refused.stdout
        (mine,) = [
            j for j in json.loads(cluster.user.ok("pedl", "job", "list", "--json")) if j["job_id"] == job
        ]
        assert mine["weight"] == 2, mine
    finally:
        det.run("e", "kill", exp)


def test_the_sdk_workflow(det: Det, cluster: Cluster) -> None:
    script = cluster.tmp / "sdk_workflow.py"
    script.write_text(SDK_WORKFLOW)
    r = subprocess.run(
        [str(det.bin / "python"), str(script), cluster.det_master, cluster.admin_password,
         str(cluster.tmp / "single.yaml"), str(cluster.tmp / "model"), str(cluster.tmp / "sdk-top")],
        env=det.env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["state"] == "COMPLETED" and len(result["trials"]) == 1
    assert result["validations"] and "error" in result["validations"][-1]
    assert result["runs"] == [1]  # each report names the run that wrote it, counted from 1
    assert result["batch_metrics"] and all(b is None for b in result["batch_metrics"])
    assert (Path(result["path"]) / "model_state_dict.pt").is_file()


def _request(
    cluster: Cluster, method: str, path: str, body: bytes | None, token: str = ""
) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(cluster.det_master + path, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _experiment_states_until(cluster: Cluster, exp: str, wanted: str) -> list[str]:
    sent = json.dumps({"username": "admin", "password": cluster.admin_password}).encode()
    token = _request(cluster, "POST", "/api/v1/auth/login", sent)[1]["token"]
    seen: list[str] = []
    for _ in range(600):
        got = _request(cluster, "GET", f"/api/v1/experiments/{exp}", None, token)[1]
        seen.append(got["experiment"]["state"])
        if seen[-1] == wanted:
            break
        time.sleep(0.2)
    return seen


def test_free_slots_have_a_null_container_as_determineds_gateway_writes(cluster: Cluster) -> None:
    sent = json.dumps({"username": "admin", "password": cluster.admin_password}).encode()
    token = _request(cluster, "POST", "/api/v1/auth/login", sent)[1]["token"]
    agents = _request(cluster, "GET", "/api/v1/agents", None, token)[1]["agents"]
    slots = [slot for agent in agents for slot in agent["slots"].values()]
    assert len(slots) == 2 and all("container" in slot for slot in slots), slots
    busy = {slot["container"]["id"] for slot in slots if slot["container"]}
    assert busy == set(agents[0]["containers"]), agents  # Determined's e2e counts free slots so


def test_bad_input_is_a_4xx_in_determineds_error_shape_and_creates_nothing(cluster: Cluster) -> None:
    status, login = _request(
        cluster, "POST", "/api/v1/auth/login",
        json.dumps({"username": "admin", "password": cluster.admin_password}).encode(),
    )  # fmt: skip
    assert status == 200 and login["user"]["admin"] is True
    token = login["token"]
    _, before = _request(cluster, "GET", "/api/v1/experiments", None, token)
    cases = {
        b"{not json": (400, "not JSON"),
        json.dumps({"config": "x: 1", "colour": "red"}).encode(): (400, 'unknown field "colour"'),
        json.dumps({"config": 5}).encode(): (400, 'field "config" must be a string'),
        json.dumps({"config": "searcher: {name: nope}\n"}).encode(): (400, "searcher"),
    }
    for sent, (want, words) in cases.items():
        status, error = _request(cluster, "POST", "/api/v1/experiments", sent, token)
        assert status == want and words in error["message"], (sent, status, error)
        assert error["error"]["error"] == error["message"] and isinstance(error["code"], int)
    for bad_token in ("", "not-a-token"):
        status, error = _request(cluster, "GET", "/api/v1/experiments", None, bad_token)
        assert status == 401 and error["message"], error
    _, after = _request(cluster, "GET", "/api/v1/experiments", None, token)
    assert after["pagination"]["total"] == before["pagination"]["total"]
    status, error = _request(cluster, "GET", "/api/v1/webhooks", None, token)
    assert status == 501 and "pedl has no webhooks" in error["message"]


def test_an_older_client_still_common_0_26_works_too(det: Det, cluster: Cluster) -> None:
    old = Det(install("0.26.7"), cluster.det_master, cluster.tmp / "old-home")
    old.login("admin", cluster.admin_password)
    assert "You are logged in as user 'admin'" in old.ok("user", "whoami")
    assert "agent-1" in old.ok("agent", "list")
    listed = old.ok("e", "list")
    exp = re.search(r"^\s+(\d+) \| admin .*\| COMPLETED", listed, re.M)
    assert exp, listed
    assert "COMPLETED" in old.ok("e", "describe", exp.group(1))
    assert re.search(r"^\s+\d+ \| COMPLETED", old.ok("e", "lt", exp.group(1)), re.M)


def test_det_user_ls_leaves_deactivated_users_out_as_determined_does(det: Det, cluster: Cluster) -> None:
    det.ok("user", "create", "carol", "--password", "Carol-passw0rd")
    assert re.search(r"\| carol +\|", det.ok("user", "ls"))
    cluster.user.ok("pedl", "user", "deactivate", "carol")
    assert not re.search(r"\| carol +\|", det.ok("user", "ls"))  # Determined's client asks active=true
    status, login = _request(
        cluster, "POST", "/api/v1/auth/login",
        json.dumps({"username": "admin", "password": cluster.admin_password}).encode(),
    )  # fmt: skip
    token = login["token"]
    _, everyone = _request(cluster, "GET", "/api/v1/users", None, token)
    assert "carol" in [u["username"] for u in everyone["users"]]
    _, admins = _request(cluster, "GET", "/api/v1/users?admin=true&name=ADM", None, token)
    assert [u["username"] for u in admins["users"]] == ["admin"]
    status, error = _request(cluster, "GET", "/api/v1/users?active=maybe", None, token)
    assert status == 400 and "active must be true or false" in error["message"]


def test_a_deactivated_user_is_told_so_only_with_the_right_password(det: Det, cluster: Cluster) -> None:
    det.ok("user", "create", "dave", "--password", "Dave-passw0rd")
    det.ok("user", "deactivate", "dave")
    dave = Det(det.bin, cluster.det_master, cluster.tmp / "dave-home")
    refused = dave.run("user", "login", "dave", input="Dave-passw0rd\n")
    assert refused.returncode != 0 and "user is not active" in refused.stdout + refused.stderr, refused
    answers = {"Dave-passw0rd": (403, "user is not active"), "wrong-pw": (401, "wrong")}
    for password, (want, words) in answers.items():
        sent = json.dumps({"username": "dave", "password": password}).encode()
        status, error = _request(cluster, "POST", "/api/v1/auth/login", sent)
        assert status == want and words in error["message"], (password, status, error)
    det.ok("user", "activate", "dave")
    dave.login("dave", "Dave-passw0rd")


def test_users_set_their_display_name_as_determineds_patch_user_does(det: Det, cluster: Cluster) -> None:
    det.ok("user", "create", "frank", "--password", "Frank-passw0rd")
    sent = json.dumps({"username": "frank", "password": "Frank-passw0rd"}).encode()
    token = _request(cluster, "POST", "/api/v1/auth/login", sent)[1]["token"]
    me = _request(cluster, "GET", "/api/v1/me", None, token)[1]["user"]
    path = f"/api/v1/users/{me['id']}"

    def named(value: str, where: str = path) -> tuple[int, Any]:
        return _request(cluster, "PATCH", where, json.dumps({"displayName": value}).encode(), token)

    status, patched = named("Frank F.")
    assert status == 200 and patched["user"]["displayName"] == "Frank F.", patched
    assert _request(cluster, "GET", path, None, token)[1]["user"]["displayName"] == "Frank F."
    status, error = named("Admin")
    assert status == 400 and "another user's username" in error["message"], error
    assert named("")[0] == 200 and _request(cluster, "GET", path, None, token)[1]["user"]["displayName"] == ""
    admin = _request(cluster, "GET", "/api/v1/users/admin/by-username", None, token)[1]["user"]
    status, error = named("x", f"/api/v1/users/{admin['id']}")
    assert status == 403 and "only an admin" in error["message"], error


def test_a_user_created_with_an_agent_user_group_is_linked_and_a_partial_one_creates_nobody(
    cluster: Cluster,
) -> None:
    sent = json.dumps({"username": "admin", "password": cluster.admin_password}).encode()
    token = _request(cluster, "POST", "/api/v1/auth/login", sent)[1]["token"]
    group = {"agentUid": 1000, "agentGid": 1001, "agentUser": "gina", "agentGroup": "staff"}
    for name, given, want in (("gina", group, 200), ("hank", {"agentUid": 1000, "agentGid": 1001}, 400)):
        body = {"user": {"username": name, "agentUserGroup": given}, "password": "Pass-w0rd-long"}
        status, answer = _request(cluster, "POST", "/api/v1/users", json.dumps(body).encode(), token)
        assert status == want, answer
    assert answer["message"].startswith('"agentUserGroup" needs agentUid and agentGid')
    listed = [u["username"] for u in _request(cluster, "GET", "/api/v1/users", None, token)[1]["users"]]
    assert "gina" in listed and "hank" not in listed
    with sqlite3.connect(cluster.tmp / "pedl-home" / "cluster" / "pedl.db", timeout=30) as db:
        rows = db.execute(
            "SELECT uid, gid, agent_user, agent_group FROM agent_user_links JOIN users"
            " ON users.id = agent_user_links.user_id WHERE username = 'gina'"
        ).fetchall()
    assert rows == [(1000, 1001, "gina", "staff")]  # her trials run as that Unix user


LOG_CHECK = """
import faulthandler, json, sys
faulthandler.dump_traceback_later(500, exit=True)
from determined.common import api
from determined.common.api import bindings
from determined.experimental import client
client.login(master=sys.argv[1], user="admin", password=sys.argv[2])
sess = client._determined._session
exp = client.create_experiment(config=sys.argv[3], model_dir=sys.argv[4])
assert exp.wait(interval=0.2) == client.ExperimentState.COMPLETED
trial = bindings.get_GetTrial(sess, trialId=exp.list_trials()[0].id).trial
print("trial", trial.id, file=sys.stderr, flush=True)
out = {}
for name, logs, fields in (
    ("trial", lambda **k: api.trial_logs(sess, trial.id, **k),
     lambda **k: bindings.get_TrialLogsFields(sess, trialId=trial.id, **k)),
    ("task", lambda **k: api.task_logs(sess, trial.taskId, **k),
     lambda **k: bindings.get_TaskLogsFields(sess, taskId=trial.taskId, **k)),
):
    listed = [f.to_json() for f in fields()]
    out[name] = {
        "followed": len(list(logs(follow=True))), "tail": len(list(logs(tail=3))),
        "head": len(list(logs(head=3))), "fields": listed, "followed_fields": len(list(fields(follow=True))),
        "stderr": len(list(logs(stdtypes=["stderr"]))), "stdout": len(list(logs(stdtypes=["stdout"]))),
        "no_rank": len(list(logs(rank_ids=[-1]))), "rank_2": len(list(logs(rank_ids=[-2]))),
        "agent": len(list(logs(agent_ids=["agent-1"]))),
        "errors": len(list(logs(min_level=bindings.v1LogLevel.ERROR))),
    }
searched = api.trial_logs(sess, trial.id, search_text="WORKLOAD_KIND_CHECKPOINT_MODEL")
out["searched"] = [x.message for x in searched][:1]
print(json.dumps(out))
"""


@pytest.mark.timeout(900)
def test_trial_and_task_logs_with_fields_and_filters_as_determineds_sdk_reads_them(
    det: Det, cluster: Cluster
) -> None:
    script = cluster.tmp / "log_check.py"
    script.write_text(LOG_CHECK)
    r = subprocess.run(
        [str(det.bin / "python"), str(script), cluster.det_master, cluster.admin_password,
         str(cluster.tmp / "single.yaml"), str(cluster.tmp / "model")],
        env=det.env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    for name in ("trial", "task"):
        got = result[name]
        total = got["followed"]
        assert total > 3 and got["tail"] == 3 and got["head"] == 3, got
        assert got["fields"] and got["followed_fields"] >= 1, got
        fields = got["fields"][0]
        assert "stdout" in fields["stdtypes"] and fields["rankIds"] == [] and fields["agentIds"] == [], got
        assert got["stderr"] + got["stdout"] == total and got["stdout"] > 0, got
        assert got["no_rank"] == total and got["rank_2"] == 0 and got["agent"] == 0, got
        assert got["errors"] == got["stderr"], got
    assert (
        "allocationIds" in result["task"]["fields"][0] and "allocationIds" not in result["trial"]["fields"][0]
    )


GC_WATCH = """
import json, os, sys, time
from determined.common.api import bindings
from determined.experimental import client
client.login(master=sys.argv[1], user="admin", password=sys.argv[2])
exp = client.create_experiment(config=sys.argv[3], model_dir=sys.argv[4])
assert exp.wait(interval=0.5).name == "COMPLETED"
sess = client._get_singleton_session()
uuids = [c.uuid for c in bindings.get_GetExperimentCheckpoints(sess, id=exp.id).checkpoints]
for i in range(int(sys.argv[6])):  # a large checkpoint: its files take a while to delete
    padding = os.path.join(sys.argv[5], uuids[0], "padding", str(i // 1000))
    os.makedirs(padding, exist_ok=True)
    open(os.path.join(padding, str(i)), "w").close()
bindings.delete_DeleteCheckpoints(sess, body=bindings.v1DeleteCheckpointsRequest(checkpointUuids=uuids))
name, polls = f"Checkpoint GC (Experiment {exp.id})", []
deadline = time.monotonic() + 60
while time.monotonic() < deadline:  # as Determined's e2e wait_for_gc_to_finish polls
    polls.append(name in [t["name"] for t in sess.get("tasks").json().values()])
    if polls[-1] is False and True in polls:
        break
states = [bindings.get_GetCheckpoint(sess, checkpointUuid=u).checkpoint.state.value for u in uuids]
print(json.dumps({"uuids": uuids, "polls": polls, "states": states}))
"""


def test_a_checkpoint_delete_is_a_gc_task_listed_until_the_files_are_gone(det: Det, cluster: Cluster) -> None:
    """Determined's DELETE /api/v1/checkpoints answers once a "Checkpoint GC (Experiment N)" task is
    started; GET /tasks lists it until the store has deleted the files, as Determined's master does.
    A large checkpoint (20,000 files) keeps the deletion going for longer than one poll takes."""
    script = cluster.tmp / "gc_watch.py"
    script.write_text(GC_WATCH)
    stored = cluster.tmp / "pedl-home" / "cluster" / "checkpoints"
    r = subprocess.run(
        [str(det.bin / "python"), str(script), cluster.det_master, cluster.admin_password,
         str(cluster.tmp / "single.yaml"), str(cluster.tmp / "model"), str(stored), "20000"],
        env=det.env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    polls = result["polls"]
    print(f"GC task listed in {polls.count(True)} of {len(polls)} polls")
    assert result["uuids"] and polls[0] is True and polls[-1] is False, polls
    assert set(result["states"]) == {"STATE_DELETED"}, result["states"]
    assert not [u for u in result["uuids"] if (stored / u).exists()]
