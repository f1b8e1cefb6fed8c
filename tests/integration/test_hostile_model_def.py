"""A hostile model definition, submitted by a non-admin account, stays inside its sandboxed trial.

The cluster lives where `pedl cluster up` puts it ($PEDL_HOME/cluster: cluster secret, admin password,
database, checkpoint store, agents) and outside /tmp, so hiding it is the sandbox's doing, not the
private /tmp's. The model definition tries to lift the sandbox's covers (umount), to read the secrets,
the agent's state and another trial's directory, the agent's environment, to signal the agent, to write
outside its directory and to leave a child behind; every attempt fails, and the trial still trains to
completion.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from pedl import _grpc, auth
from pedl.auth.bearer import BearerInterceptor
from pedl.context import pack
from pedl.v1 import auth_pb2, auth_pb2_grpc, common_pb2, scheduler_pb2, scheduler_pb2_grpc
from support.models import tiny_config, write_tiny_model
from support.processes import LocalCluster, local_cluster, login

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
# The Unix user mallory is linked to (`pedl user link-with-agent-user`).
LINKED_UID = 4343

PROBE = r"""
import ctypes, json, os, signal, sys, time
from pathlib import Path


def _read(path):
    return Path(path).read_bytes()[:200].decode(errors="replace")


def _walk(top):
    found = []
    for d, _, files in os.walk(top):
        found += [os.path.join(d, f) for f in files]
    return found


def run():
    here = Path.cwd()
    report = here.parent / "hostile-report.json"
    if report.exists():
        return
    targets = json.loads((here / "probe_targets.json").read_text())
    results = []
    libc = ctypes.CDLL(None, use_errno=True)

    def uncover(path):  # lift the sandbox's cover off a hidden directory (umount2, MNT_DETACH)
        if libc.umount2(path.encode(), 2) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return "uncovered"

    def attempt(kind, target, fn):
        try:
            value = fn()
            results.append({"kind": kind, "target": str(target), "ok": True, "value": value})
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
            results.append({"kind": kind, "target": str(target), "ok": False, "value": error})

    for path in targets["uncover"]:
        attempt("uncover", path, lambda p=path: uncover(p))
    for path in targets["read"]:
        attempt("read", path, lambda p=path: _read(p))
    for top in targets["walk"]:
        attempt("walk", top, lambda t=top: _walk(t))
    agent = targets["agent_pid"]
    attempt("read", f"/proc/{agent}/environ", lambda: _read(f"/proc/{agent}/environ"))
    attempt("pids", "/proc", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
    attempt("signal", agent, lambda: os.kill(agent, signal.SIGTERM))
    attempt("environ", "os.environ", lambda: dict(os.environ))
    for path in targets["write"]:
        attempt("write", path, lambda p=path: Path(p).write_text("pwned") and "written")
    attempt("uid", "os.getuid", lambda: [os.getuid(), os.getgid(), os.getgroups()])
    if targets["mount"]:  # its experiment's bind mount: read, and written as its user
        mounted = Path(targets["mount"])
        attempt("mount-read", mounted, lambda: (mounted / "input.txt").read_text())
        attempt("mount-write", mounted, lambda: (mounted / "output.txt").write_text("trained") and "written")
    if os.fork() == 0:  # a child that leaves the process group and ignores SIGTERM, writing forever
        try:
            os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            while True:
                with open(here.parent / "survivor.txt", "a") as f:
                    f.write(f"{time.time()}\n")
                time.sleep(0.2)
        finally:
            os._exit(0)
    report.write_text(json.dumps(results))
    for r in results:
        print(f"hostile probe: {r['kind']} {r['target']}: {'SUCCEEDED' if r['ok'] else 'failed'}", flush=True)
"""


@pytest.fixture
def home() -> Iterator[Path]:
    """$PEDL_HOME outside /tmp (under the repository's ignored .cache)."""
    path = ROOT / ".cache" / f"hostile-{uuid.uuid4().hex[:8]}"
    (path / "home").mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _user_token(cluster: LocalCluster, name: str) -> str:
    stub = auth_pb2_grpc.AuthServiceStub(_grpc.channel(cluster.master))
    stub.CreateUser(auth_pb2.CreateUserRequest(username=name, password=name * 3), timeout=30)
    return login(cluster.master, name, name * 3)


def _run(
    stub: scheduler_pb2_grpc.SchedulerServiceStub, model: Path, config: str
) -> scheduler_pb2.GetExperimentResponse:
    packed = pack(model)
    request = scheduler_pb2.CreateExperimentRequest(
        config_yaml=config, model_definition=packed.data, model_definition_name=packed.name
    )
    exp_id = stub.CreateExperiment(request, timeout=30).experiment.id
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        response = stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id), timeout=30)
        if response.experiment.state not in (
            common_pb2.EXPERIMENT_STATE_ACTIVE,
            common_pb2.EXPERIMENT_STATE_PAUSED,
        ):
            return response
        time.sleep(0.3)
    raise AssertionError(f"experiment {exp_id} did not end")


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_a_hostile_model_definition_reaches_nothing_outside_its_trial(
    start: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forked from the agent's fork server (the default) as spawned: the same sandbox."""
    pedl_home = home / "home"
    monkeypatch.setenv("PEDL_HOME", str(pedl_home))
    # Finished runs' directories stay (--keep-trial-dirs): the probe targets one and leaves a report.
    # Data under home/data may be mounted into trials (the scheduler checks at create, the agent at start).
    (home / "data").mkdir()
    roots = ["--allowed-bind-root", str(home / "data")]
    agent_args = ["--keep-trial-dirs", "1h", "--harness-start", start, *roots]
    with local_cluster(pedl_home / "cluster", agent_args=agent_args, scheduler_args=roots) as cluster:
        try:
            if start == "fork":  # until then, runs spawn rather than wait for its imports
                _wait_for_log(cluster, "fork server ready")
            # A run with a bind mount spawns (a fork server's sandbox holds no experiment's mounts).
            _check_hostile_trial(cluster, home, pedl_home, mount=start == "spawn")
            assert ("harness forked" in cluster.logs()) == (start == "fork")
        except BaseException:
            print(cluster.logs())
            raise


def _wait_for_log(cluster: LocalCluster, text: str, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while text not in cluster.logs():
        assert time.monotonic() < deadline, f"{text!r} not in the cluster's logs after {seconds} s"
        time.sleep(0.5)


def _host_files(name: str) -> tuple[Path, Path]:
    """A mode-0600 file of root's in /root and a file in another Unix user's home (world-readable,
    as a home often is): the view, not permissions, must keep a trial from them."""
    root_file = Path("/root") / f".pedl-hostile-{name}"
    other_home = Path("/home") / f"pedl-other-{name}"
    if os.geteuid() == 0:
        root_file.write_text("root's secret")
        root_file.chmod(0o600)
        other_home.mkdir(parents=True, exist_ok=True)
        (other_home / "notes.txt").write_text("someone else's notes")
        os.chown(other_home / "notes.txt", 4242, 4242)
    return root_file, other_home / "notes.txt"


def _check_hostile_trial(cluster: LocalCluster, home: Path, pedl_home: Path, mount: bool) -> None:
    root_file, other_file = _host_files(home.name)
    try:
        _check_hostile_trial_reaches(cluster, home, pedl_home, mount, [root_file, other_file])
    finally:
        root_file.unlink(missing_ok=True)
        shutil.rmtree(other_file.parent, ignore_errors=True)


def _check_hostile_trial_reaches(
    cluster: LocalCluster, home: Path, pedl_home: Path, mount: bool, host_files: list[Path]
) -> None:
    workdir = pedl_home / "cluster"
    admin_token = os.environ[auth.ENV_TOKEN]
    auth.save_login(cluster.master, {"username": "admin", "token": admin_token}, pedl_home / "auth.json")
    secrets = {
        "cluster secret": cluster.secret_file.read_text().strip(),
        "admin password": cluster.admin_password,
        "admin token": admin_token,
    }
    admin = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
    (agent,) = admin.ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=30).agents
    assert agent.isolation == "bwrap"  # what `pedl agent list` shows
    benign = _run(admin, write_tiny_model(home / "benign"), tiny_config(max_batches=10))
    assert benign.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
    agent_dir = workdir / "agent0"
    other_trial = agent_dir / "trials" / f"{benign.trials[0].id}-1"
    assert (other_trial / "trial.log").is_file()

    model = write_tiny_model(home / "hostile", "import hostile_probe; hostile_probe.run()")
    (model / "hostile_probe.py").write_text(PROBE)
    planted = [workdir / "planted", other_trial / "planted", home / "planted", Path(f"/etc/{home.name}")]
    tmp_planted = Path(f"/tmp/pedl-{home.name}")
    targets = {
        "read": [
            str(workdir / "cluster-secret"),
            str(workdir / "admin-password"),
            str(pedl_home / "auth.json"),
            str(workdir / "pedl.db"),
            str(other_trial / "trial.log"),
            "/etc/shadow",
            *(str(p) for p in host_files),
        ],
        "walk": [str(pedl_home), str(agent_dir), str(other_trial), str(workdir / "checkpoints")],
        "write": [str(p) for p in planted] + [str(tmp_planted)],
        "uncover": [str(pedl_home), str(workdir), str(agent_dir)],
        "agent_pid": cluster.agents[0].process.pid,
        "mount": "/data" if mount else "",
    }
    (model / "probe_targets.json").write_text(json.dumps(targets))

    mallory = _user_token(cluster, "mallory")
    # As Determined's `det user link-with-agent-user`: a root agent runs mallory's trials as this user.
    link = auth_pb2.LinkAgentUserRequest(
        username="mallory", agent_user=auth_pb2.AgentUser(uid=LINKED_UID, gid=LINKED_UID, user="mallory")
    )
    auth_pb2_grpc.AuthServiceStub(_grpc.channel(cluster.master)).LinkAgentUser(link, timeout=30)
    channel = grpc.intercept_channel(grpc.insecure_channel(cluster.master), BearerInterceptor(mallory))
    (home / "data" / "input.txt").write_text("shared data")
    if os.geteuid() == 0:  # the linked user's data, as on a shared file system
        os.chown(home / "data", LINKED_UID, LINKED_UID)
    extra = f"bind_mounts:\n  - {{host_path: {home / 'data'}, container_path: /data}}\n" if mount else ""
    response = _run(
        scheduler_pb2_grpc.SchedulerServiceStub(channel), model, tiny_config(max_batches=20, extra=extra)
    )

    (trial,) = response.trials
    trial_dir = agent_dir / "trials" / f"{trial.id}-1"
    results = json.loads((trial_dir / "hostile-report.json").read_text())
    print("\nWhat the hostile model definition tried (as the non-admin user mallory):")
    for r in results:
        shown = "<its own allow-listed environment>" if r["kind"] == "environ" else r["value"]
        print(f"  {r['kind']:8} {r['target']}: {'got ' + repr(shown)[:90] if r['ok'] else r['value'][:90]}")

    leaked = [(n, r["target"]) for r in results for n, s in secrets.items() if s in json.dumps(r["value"])]
    assert leaked == [], f"secrets reached the trial: {leaked}"
    by = {(r["kind"], r["target"]): r for r in results}
    for path in targets["uncover"]:  # a root agent's sandbox must not hand its capabilities on
        assert not by[("uncover", path)]["ok"], f"the trial unmounted the cover over {path}"
    for path in targets["read"]:
        r = by[("read", path)]
        assert not r["ok"] or r["value"] == "", f"read {path}: {r['value']!r}"
    uid, gid, groups = by[("uid", "os.getuid")]["value"]
    assert uid != 0 and gid != 0 and 0 not in groups  # never root
    # A root agent runs it as the user mallory is linked to; any other agent as itself.
    assert (uid, gid) == ((LINKED_UID, LINKED_UID) if os.geteuid() == 0 else (os.getuid(), os.getgid()))
    if mount:  # the mount at its container_path, read and written as the trial's user
        assert by[("mount-read", "/data")]["value"] == "shared data"
        assert by[("mount-write", "/data")]["ok"], by[("mount-write", "/data")]
        written = home / "data" / "output.txt"
        assert written.read_text() == "trained" and written.stat().st_uid == uid
    own = (str(trial_dir) + "/", str(agent_dir / "sock" / f"{trial.id}-1.sock"))
    for top in targets["walk"]:
        r = by[("walk", top)]
        seen = r["value"] if r["ok"] else []
        assert [f for f in seen if not f.startswith(own)] == [], f"walk {top} found {seen}"
    assert not by[("read", f"/proc/{targets['agent_pid']}/environ")]["ok"]
    assert targets["agent_pid"] not in by[("pids", "/proc")]["value"]  # its own PID namespace
    assert not by[("signal", str(targets["agent_pid"]))]["ok"]
    assert cluster.agents[0].process.poll() is None
    for path in planted:
        assert not path.exists(), f"the trial wrote {path}"
    assert not tmp_planted.exists()  # its /tmp is its own
    assert set(by[("environ", "os.environ")]["value"]) >= {"PEDL_TOKEN", "HOME"}

    survivor = trial_dir / "survivor.txt"
    assert survivor.is_file()  # the child ran...
    # ...and died with its trial: the file stops growing (it was written every 0.2 s). Its trial's
    # processes are killed as the trial ends, which on a loaded machine may lag the reported state.
    deadline = time.monotonic() + 60
    while True:
        size = survivor.stat().st_size
        time.sleep(1.5)
        if survivor.stat().st_size == size:
            break
        assert time.monotonic() < deadline, "the trial's forked child outlived it"

    assert response.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
    assert trial.state == common_pb2.TRIAL_STATE_COMPLETED and trial.num_steps >= 2


def test_shared_fs_storage_outside_the_allowed_roots_is_refused_at_create(tmp_path: Path) -> None:
    with local_cluster(tmp_path / "cluster") as cluster:
        storage = "checkpoint_storage: {type: shared_fs, host_path: /any/path}"
        config = tiny_config(max_batches=10, extra=storage)
        packed = pack(write_tiny_model(tmp_path / "tiny"))
        stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
        request = scheduler_pb2.CreateExperimentRequest(
            config_yaml=config, model_definition=packed.data, model_definition_name=packed.name
        )
        with pytest.raises(grpc.RpcError) as e:
            stub.CreateExperiment(request, timeout=30)
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "/any/path is outside the storage roots this cluster allows" in e.value.details()
        assert str((tmp_path / "cluster" / "checkpoints").resolve()) in e.value.details()
        assert not Path("/any/path").exists()
