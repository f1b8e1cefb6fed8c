"""The real `pedl-checkpoint-store` process, driven through `pedl.checkpoints.CheckpointStoreClient`."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from checkpoint_store_process import start_checkpoint_store, stop_process
from grpc_health.v1 import health_pb2, health_pb2_grpc

from pedl import _grpc
from pedl.checkpoints import CheckpointError, CheckpointNotFound, CheckpointStoreClient
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import checkpoint_store_pb2_grpc, common_pb2

pytestmark = pytest.mark.integration

Store = tuple[subprocess.Popen, str]


def make_tree(root: Path) -> dict[str, bytes]:
    files = {
        "model.pt": os.urandom(9 * 1024 * 1024 + 123),  # three 4 MiB chunks
        "empty": b"",
        "nested/deeper/opt.pt": b"optimizer state",
        "nested/rng.json": b'{"seed": 1}',
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def read_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def checkpoint_dirs(storage: Path) -> list[str]:
    return sorted(p.name for p in storage.iterdir()) if storage.exists() else []


def test_round_trip_get_list_delete(checkpoint_store: Store, tmp_path: Path) -> None:
    _, address = checkpoint_store
    files = make_tree(tmp_path / "src")
    with CheckpointStoreClient(address) as client:
        cp = client.upload(
            tmp_path / "src", experiment_id=3, trial_id=4, total_batches=200, metadata={"framework": "torch"}
        )
        assert cp.state == common_pb2.CHECKPOINT_STATE_COMPLETED
        assert cp.total_size == sum(len(d) for d in files.values())
        assert {f.path: f.sha256 for f in cp.files} == {
            p: hashlib.sha256(d).hexdigest() for p, d in files.items()
        }

        got = client.download(cp.uuid, tmp_path / "dst")
        assert got == cp
        assert read_tree(tmp_path / "dst") == files

        assert client.get(cp.uuid) == cp
        other = client.upload(tmp_path / "src" / "nested", experiment_id=3, trial_id=5, total_batches=10)
        assert [c.uuid for c in client.list()] == [other.uuid, cp.uuid]
        assert [c.uuid for c in client.list(trial_id=4)] == [cp.uuid]
        assert client.list(experiment_id=99) == []

        client.delete(cp.uuid)
        assert [c.uuid for c in client.list()] == [other.uuid]
        assert checkpoint_dirs(tmp_path / "checkpoints") == [other.uuid]
        with pytest.raises(CheckpointNotFound, match=f"checkpoint {cp.uuid} not found"):
            client.get(cp.uuid)


def test_unknown_uuid_is_not_found_everywhere(checkpoint_store: Store, tmp_path: Path) -> None:
    _, address = checkpoint_store
    with CheckpointStoreClient(address) as client:
        for call in (client.get, client.delete, lambda u: client.download(u, tmp_path / "d")):
            with pytest.raises(CheckpointNotFound, match="checkpoint no-such-uuid not found") as info:
                call("no-such-uuid")
            assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert not (tmp_path / "d").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".d")] == []


def test_raw_stream_errors_are_invalid_argument(checkpoint_store: Store) -> None:
    _, address = checkpoint_store
    stub = checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(_grpc.channel(address))
    header = pb.UploadCheckpointRequest(header=pb.UploadHeader(experiment_id=1, trial_id=1))
    cases = [
        (
            pb.FileChunk(path="w.pt", data=b"abc", last=True, sha256="0" * 64),
            "sha256 mismatch for file 'w.pt'",
        ),
        (pb.FileChunk(path="/etc/x", data=b"a", last=True, sha256="0" * 64), "is absolute"),
        (pb.FileChunk(path="a/../../x", data=b"a", last=True, sha256="0" * 64), "contains '..'"),
    ]
    for chunk, message in cases:
        with pytest.raises(grpc.RpcError) as info:
            stub.UploadCheckpoint(iter([header, pb.UploadCheckpointRequest(chunk=chunk)]))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        stub.UploadCheckpoint(iter([]))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert stub.ListCheckpoints(pb.ListCheckpointsRequest()).checkpoints == []


def test_killed_client_leaves_nothing_visible(checkpoint_store: Store, tmp_path: Path) -> None:
    _, address = checkpoint_store
    storage = tmp_path / "checkpoints"
    script = Path(__file__).with_name("_slow_uploader.py")
    uploader = subprocess.Popen([sys.executable, str(script), address], stdout=subprocess.PIPE)
    try:
        assert uploader.stdout is not None
        assert uploader.stdout.readline() == b"sent\n"
        wait_for(lambda: any(storage.glob("*/data/dir/part")), "partial upload to reach storage")
        with CheckpointStoreClient(address) as client:
            assert client.list() == []
        uploader.send_signal(signal.SIGKILL)
        uploader.wait()
        wait_for(lambda: checkpoint_dirs(storage) == [], "partial upload to be removed")
        with CheckpointStoreClient(address) as client:
            assert client.list() == []
    finally:
        if uploader.poll() is None:
            uploader.kill()
            uploader.wait()


def test_health_is_serving(checkpoint_store: Store) -> None:
    _, address = checkpoint_store
    stub = health_pb2_grpc.HealthStub(_grpc.channel(address))
    for service in ("", "pedl.v1.CheckpointStoreService"):
        response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert response.status == health_pb2.HealthCheckResponse.SERVING


def test_checkpoints_survive_a_restart_and_sigterm_exits_cleanly(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"data")
    proc, address = start_checkpoint_store(tmp_path)
    try:
        with CheckpointStoreClient(address) as client:
            cp = client.upload(tmp_path / "src", experiment_id=1, trial_id=1, total_batches=5)
    finally:
        assert stop_process(proc) == 0
    proc, address = start_checkpoint_store(tmp_path)
    try:
        with CheckpointStoreClient(address) as client:
            assert client.get(cp.uuid) == cp
            client.download(cp.uuid, tmp_path / "dst")
        assert (tmp_path / "dst" / "f").read_bytes() == b"data"
    finally:
        stop_process(proc)


def test_unreachable_store_is_a_clear_error(tmp_path: Path) -> None:
    proc, address = start_checkpoint_store(tmp_path)
    stop_process(proc)
    with CheckpointStoreClient(address) as client:
        with pytest.raises(CheckpointError, match=f"checkpoint store at {address} unreachable"):
            client.list()


def test_download_into_non_empty_directory_is_refused(checkpoint_store: Store, tmp_path: Path) -> None:
    _, address = checkpoint_store
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"1")
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "mine").write_bytes(b"keep")
    with CheckpointStoreClient(address) as client:
        cp = client.upload(tmp_path / "src", experiment_id=1, trial_id=1, total_batches=1)
        with pytest.raises(CheckpointError, match="exists and is not an empty directory"):
            client.download(cp.uuid, tmp_path / "dst")
    assert read_tree(tmp_path / "dst") == {"mine": b"keep"}


def wait_for(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: bytes([data[0] ^ 1]) + data[1:], r"'model.pt' of checkpoint .* is corrupt: .* sha256"),
        (
            lambda data: data[:-1],
            r"'model.pt' of checkpoint .* is corrupt: the record says \d+ bytes, storage",
        ),
    ],
    ids=["flipped-bit", "truncated"],
)
def test_damaged_file_fails_the_download(
    checkpoint_store: Store, tmp_path: Path, damage, message: str
) -> None:
    """The store passes bytes through and checks sizes; the client checks each file's sha256."""
    _, address = checkpoint_store
    make_tree(tmp_path / "src")
    with CheckpointStoreClient(address) as client:
        cp = client.upload(tmp_path / "src", experiment_id=1, trial_id=1, total_batches=1)
        stored = tmp_path / "checkpoints" / cp.uuid / "data" / "model.pt"
        stored.write_bytes(damage(stored.read_bytes()))
        with pytest.raises(CheckpointError, match=message) as info:
            client.download(cp.uuid, tmp_path / "dst")
        assert info.value.code == grpc.StatusCode.DATA_LOSS
    assert not (tmp_path / "dst").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".dst")] == []
