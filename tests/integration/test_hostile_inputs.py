"""Bad input, counted: hostile model-definition archives and model code, and malformed or oversized
gRPC requests, thrown at a real cluster (bubblewrap sandbox on). Each gets a clear error, the services
stay up, and a benign experiment that ran before is untouched.

At create (the scheduler checks the archive as an agent would unpack it): path traversal, absolute
paths, symlinks and hard links out of the tree, devices and FIFOs, more entries than allowed (100,001
tiny files: the limit is 100,000 entries, so a million stop at the same entry; building a million
takes long), a declared 10 GiB (sparse) file, a gzip bomb expanding past 1 GiB, a zip file, names
that are not UTF-8, garbage, truncated gzip, an empty definition. At the agent: an `__init__` that
forks a process tree, one whose import never returns (`--trial-load-timeout`), one writing past
`--trial-disk-limit`, one flooding its log past `--trial-log-limit`.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
import time
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from pedl import _grpc
from pedl.context import pack
from pedl.v1 import checkpoint_store_pb2, common_pb2, scheduler_pb2, scheduler_pb2_grpc
from support.models import tiny_config, write_model_with_prelude, write_tiny_model
from support.processes import LocalCluster, local_cluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

AGENT_LIMITS = [
    "--trial-disk-limit", "64M",
    "--trial-disk-poll", "0.2",
    "--trial-load-timeout", "10s",
    "--trial-log-limit", "1M",
    "--keep-failed-trial-dirs", "1h",
]  # fmt: skip
ENDED = (common_pb2.EXPERIMENT_STATE_ACTIVE, common_pb2.EXPERIMENT_STATE_PAUSED)


# --- archives ---------------------------------------------------------------------------------


def _tar(entries: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]], compress: bool = True) -> bytes:
    buf = io.BytesIO()
    mode = "w:gz" if compress else "w"
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.GNU_FORMAT, errors="surrogateescape") as tar:
        init = tarfile.TarInfo("__init__.py")
        init.size = 0
        tar.addfile(init, io.BytesIO())
        for entry in entries:
            info, data = entry if isinstance(entry, tuple) else (entry, b"")
            if info.isreg():
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", data: bytes = b"x") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return (info, data)


def _many_files(count: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("f")
        for i in range(count):
            info.name = f"d{i // 1000}/{i}"
            tar.addfile(info)
    return buf.getvalue()


def _sparse_10g() -> bytes:
    """A regular-file header declaring 10 GiB (what a sparse file packs as) with none of its data."""
    info = tarfile.TarInfo("huge.bin")
    info.size = 10 * 1024**3
    return gzip.compress(info.tobuf(format=tarfile.PAX_FORMAT))


def _gzip_bomb(files: int = 11, size: int = 100 * 2**20) -> bytes:
    """About 1 MiB compressed, 1.1 GiB of zeros unpacked: each entry alone is within the limits."""
    out = io.BytesIO()
    zeros = bytes(1 << 20)
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as gz:
        for i in range(files):
            info = tarfile.TarInfo(f"zeros{i}.bin")
            info.size = size
            gz.write(info.tobuf(format=tarfile.PAX_FORMAT))
            for _ in range(size >> 20):
                gz.write(zeros)
        gz.write(bytes(1024))
    return out.getvalue()


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("__init__.py", "")
    return buf.getvalue()


# (what it is, the archive, what the refusal says)
ARCHIVES: list[tuple[str, Callable[[], bytes], str]] = [
    ("path traversal", lambda: _tar([_entry("../escaped.py")]), "has a '..' component"),
    ("deep traversal", lambda: _tar([_entry("a/b/../../../escaped.py")]), "has a '..' component"),
    ("absolute path", lambda: _tar([_entry("/tmp/pedl-absolute.py")]), "has an absolute path"),
    (
        "symlink to /etc",
        lambda: _tar([_entry("passwd", tarfile.SYMTYPE, "/etc/passwd")]),
        "outside the archive",
    ),
    ("symlink up", lambda: _tar([_entry("up", tarfile.SYMTYPE, "../../..")]), "outside the archive"),
    (
        "write through a symlink",
        lambda: _tar([_entry("d", tarfile.SYMTYPE, "."), _entry("d/x.py")]),
        "would be written through 'd'",
    ),
    ("hard link out", lambda: _tar([_entry("h", tarfile.LNKTYPE, "/etc/shadow")]), "is a hard link to"),
    ("hard link ahead", lambda: _tar([_entry("h", tarfile.LNKTYPE, "later.py")]), "not a file earlier"),
    ("char device", lambda: _tar([_entry("null", tarfile.CHRTYPE)]), "device, FIFO or other special"),
    ("block device", lambda: _tar([_entry("sda", tarfile.BLKTYPE)]), "device, FIFO or other special"),
    ("fifo", lambda: _tar([_entry("pipe", tarfile.FIFOTYPE)]), "device, FIFO or other special"),
    ("100,001 tiny files", lambda: _many_files(100_001), "more than 100000 entries"),
    ("10 GiB sparse file", _sparse_10g, "over the 1073741824-byte limit"),
    ("gzip bomb", _gzip_bomb, "over the 1073741824-byte limit"),
    ("zip file", _zip, "not a valid model definition archive"),
    (
        "invalid UTF-8 name",
        lambda: _tar([_entry(b"bad\xff\xfe.py".decode("utf-8", "surrogateescape"))]),
        "not valid UTF-8",
    ),
    ("garbage", lambda: os.urandom(4096), "not a valid model definition archive"),
    (
        "truncated gzip",
        lambda: _tar([_entry("a.py", data=os.urandom(50_000))])[:3000],
        "corrupt or truncated",
    ),
]


# --- model code the agent runs -------------------------------------------------------------------

FORK_TREE = """
import os, subprocess, sys
MARK = {mark!r}
for _ in range(3):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", MARK], start_new_session=True)
if os.fork() == 0:  # a double-forked daemon
    if os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", MARK])
    os._exit(0)
os.wait()
"""
NEVER_IMPORTS = "import time\nwhile True:\n    time.sleep(0.5)\n"
FILLS_DISK = """
import os, time
with open("filler.bin", "wb") as f:
    for _ in range(256):
        f.write(os.urandom(1 << 20))
        f.flush()
time.sleep(60)
"""
FLOODS_LOG = "for i in range(40_000):\n    print('flood line', i, 'x' * 80)\n"


def _model(tmp: Path, name: str, prelude: str) -> Path:
    return write_model_with_prelude(tmp / name, prelude)


def _create(stub: scheduler_pb2_grpc.SchedulerServiceStub, data: bytes, config: str) -> int:
    request = scheduler_pb2.CreateExperimentRequest(
        config_yaml=config, model_definition=data, model_definition_name="model"
    )
    return stub.CreateExperiment(request, timeout=60).experiment.id


def _wait(
    stub: scheduler_pb2_grpc.SchedulerServiceStub, exp_id: int, timeout: float = 180
) -> scheduler_pb2.GetExperimentResponse:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id), timeout=30)
        if response.experiment.state not in ENDED:
            return response
        time.sleep(0.3)
    raise AssertionError(f"experiment {exp_id} did not end")


def _logs(stub: scheduler_pb2_grpc.SchedulerServiceStub, trial_id: int) -> list[str]:
    chunks = stub.GetTrialLogs(scheduler_pb2.GetTrialLogsRequest(trial_id=trial_id), timeout=60)
    return [line.message for chunk in chunks for line in chunk.lines]


def _marked_processes(mark: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if mark.encode() in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


def _still_up(cluster: LocalCluster) -> None:
    scheduler = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
    scheduler.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30)
    store = _grpc.channel(cluster.store.address)
    store.unary_unary(
        "/pedl.v1.CheckpointStoreService/ListCheckpoints",
        request_serializer=checkpoint_store_pb2.ListCheckpointsRequest.SerializeToString,
        response_deserializer=checkpoint_store_pb2.ListCheckpointsResponse.FromString,
    )(checkpoint_store_pb2.ListCheckpointsRequest(), timeout=30)
    for service in (cluster.scheduler, cluster.store, *cluster.agents):
        assert service.process.poll() is None, f"{service.name} exited:\n{cluster.logs()}"


def test_hostile_archives_code_and_requests_get_clear_errors_and_harm_nothing(tmp_path: Path) -> None:
    counted: list[str] = []
    with local_cluster(tmp_path / "cluster", slots=2, agent_args=AGENT_LIMITS) as cluster:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
        benign_id = _create(
            stub, pack(write_tiny_model(tmp_path / "benign")).data, tiny_config(max_batches=20)
        )
        benign = _wait(stub, benign_id)
        assert benign.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        checkpoints_before = stub.GetTrial(
            scheduler_pb2.GetTrialRequest(trial_id=benign.trials[0].id), timeout=30
        ).checkpoints

        # 1. Archives refused at create, nothing created.
        print("\nRefused at create:")
        for what, build, expected in ARCHIVES:
            with pytest.raises(grpc.RpcError) as refused:
                _create(stub, build(), tiny_config())
            details = refused.value.details() or ""
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (what, details)
            assert expected in details and "\n" not in details, (what, details)
            print(f"  {what:24} {details[:110]}")
            counted.append(what)
        with pytest.raises(grpc.RpcError) as refused:
            _create(stub, b"", tiny_config())
        assert "the model definition is empty" in (refused.value.details() or "")
        counted.append("empty definition")
        listed = stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30).experiments
        assert [e.id for e in listed] == [benign_id]
        assert not Path("/tmp/pedl-absolute.py").exists()

        # 2. Model code the agent runs: each ends with a clear error or completes, leaving nothing.
        mark = f"pedl-hostile-{uuid.uuid4().hex}"
        once = "max_restarts: 0\n"
        runs = {
            "fork tree": _model(tmp_path, "forks", FORK_TREE.format(mark=mark)),
            "never imports": _model(tmp_path, "hangs", NEVER_IMPORTS),
            "fills disk": _model(tmp_path, "fills", FILLS_DISK),
            "floods log": _model(tmp_path, "floods", FLOODS_LOG),
        }
        ids = {
            what: _create(stub, pack(model).data, tiny_config(max_batches=20, extra=once))
            for what, model in runs.items()
        }
        results = {what: _wait(stub, exp_id) for what, exp_id in ids.items()}
        print("At the agent:")
        for what, result in results.items():
            (trial,) = result.trials
            print(
                f"  {what:24} {common_pb2.ExperimentState.Name(result.experiment.state)}: {trial.error[:110]}"
            )
            counted.append(what)

        forks = results["fork tree"]
        assert forks.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        deadline = time.monotonic() + 90
        while _marked_processes(mark) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _marked_processes(mark) == []  # the whole tree died with its trial

        hangs = results["never imports"]
        assert hangs.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
        assert (
            "did not finish loading" in hangs.trials[0].error
            and "--trial-load-timeout" in hangs.trials[0].error
        )

        fills = results["fills disk"]
        assert fills.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
        assert "per-trial disk limit of 64.0 MiB" in fills.trials[0].error
        agent_trials = tmp_path / "cluster" / "agent0" / "trials"
        assert not (agent_trials / f"{fills.trials[0].id}-1").exists()  # removed at once
        assert (agent_trials / f"{hangs.trials[0].id}-1").is_dir()  # failed: kept for debugging
        assert not (agent_trials / f"{forks.trials[0].id}-1").exists()  # completed: removed

        floods = results["floods log"]
        assert floods.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        lines = _logs(stub, floods.trials[0].id)
        dropped = [line for line in lines if line.startswith("pedl: dropped ")]
        assert len(dropped) == 1 and "--trial-log-limit" in dropped[0], lines[-5:]
        assert sum(len(line) + 1 for line in lines if line.startswith("flood line")) <= 1024**2

        # 3. Malformed and oversized requests to each service.
        print("Malformed or oversized gRPC requests:")
        for what, address, method in [
            ("scheduler, malformed", cluster.master, "/pedl.v1.SchedulerService/CreateExperiment"),
            ("agent link, malformed", cluster.master, "/pedl.v1.AgentLinkService/Connect"),
            ("store, malformed", cluster.store.address, "/pedl.v1.CheckpointStoreService/GetCheckpoint"),
        ]:
            call = _grpc.channel(address).unary_unary(method)
            if method.endswith("Connect"):
                secret = cluster.secret_file.read_text().strip()  # as an agent presents it
                call = _grpc.channel(address, token=secret).stream_stream(method)
                with pytest.raises(grpc.RpcError) as bad:
                    list(call(iter([b"\xff\xff\xff\xff garbage"]), timeout=30))
            else:
                with pytest.raises(grpc.RpcError) as bad:
                    call(b"\xff\xff\xff\xff garbage", timeout=30)
            # grpc's Python server answers a request it cannot parse with UNKNOWN, naming the message
            # type and "Error parsing message"; one without credentials is refused before parsing.
            details = bad.value.details() or ""
            assert (
                bad.value.code() == grpc.StatusCode.UNKNOWN and "Error parsing message" in details
            ) or bad.value.code() == grpc.StatusCode.UNAUTHENTICATED, (what, bad.value)
            print(f"  {what:24} {bad.value.code().name}: {(bad.value.details() or '')[:90]}")
            counted.append(what)
            _still_up(cluster)
        big = scheduler_pb2.CreateExperimentRequest(
            config_yaml=tiny_config(), model_definition=bytes(120 * 2**20), model_definition_name="model"
        )
        with pytest.raises(grpc.RpcError) as bad:
            stub.CreateExperiment(big, timeout=60)
        assert bad.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, bad.value
        print(f"  {'scheduler, 120 MiB':24} {bad.value.code().name}: {(bad.value.details() or '')[:90]}")
        counted.append("scheduler, oversized")
        del big
        # A channel without pedl's client-side cap, so the store itself has to refuse it.
        unbounded = grpc.insecure_channel(
            cluster.store.address, options=[("grpc.max_send_message_length", -1)]
        )
        store_call = unbounded.unary_unary("/pedl.v1.CheckpointStoreService/GetCheckpoint")
        with pytest.raises(grpc.RpcError) as bad:
            store_call(bytes(257 * 2**20), timeout=60)
        assert bad.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, bad.value
        print(f"  {'store, 257 MiB':24} {bad.value.code().name}: {(bad.value.details() or '')[:90]}")
        counted.append("store, oversized")
        _still_up(cluster)

        # 4. The benign experiment is as it was.
        after = _wait(stub, benign_id)
        assert after.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
        detail = stub.GetTrial(scheduler_pb2.GetTrialRequest(trial_id=benign.trials[0].id), timeout=30)
        assert [c.uuid for c in detail.checkpoints] == [c.uuid for c in checkpoints_before]
        benign_ckpt = tmp_path / "cluster" / "checkpoints"
        assert all(any(benign_ckpt.rglob(c.uuid)) for c in detail.checkpoints)
    print(f"{len(counted)} hostile inputs, each refused or contained with a clear error")
    assert len(counted) >= 20
