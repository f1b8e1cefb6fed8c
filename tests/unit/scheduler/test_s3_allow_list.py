"""Experiments may name only the S3 buckets and endpoints the operator allows: refused at create by the
scheduler and on every use by the store, each with one line naming the allowed set."""

from __future__ import annotations

import pytest

from pedl.config import ExperimentConfig, parse_experiment_config
from pedl_checkpoint_store.backends import BackendResolver
from pedl_checkpoint_store.config import parse_config
from pedl_checkpoint_store.errors import InvalidArgument
from pedl_checkpoint_store.local import LocalFilesystemBackend
from pedl_checkpoint_store.s3_allow import S3Allowance
from pedl_scheduler.main import _allowed_s3, parse_args
from pedl_scheduler.storage_check import StorageCheckError, check_checkpoint_storage


def s3_config(bucket: str, endpoint: str = "") -> ExperimentConfig:
    extra = f", endpoint_url: '{endpoint}'" if endpoint else ""
    return parse_experiment_config(
        "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n"
        f"checkpoint_storage: {{type: s3, bucket: {bucket}{extra}}}\n"
    )


@pytest.mark.parametrize(
    ("bucket", "endpoint", "named"),
    [
        ("someone-elses", "http://minio:9000", "checkpoint_storage.bucket 'someone-elses'"),
        ("ckpts", "http://attacker.example:9000", "endpoint_url http://attacker.example:9000"),
        ("ckpts", "", "endpoint_url AWS's own"),
    ],
)
def test_scheduler_refuses_unlisted_buckets_and_endpoints_at_create(
    bucket: str, endpoint: str, named: str
) -> None:
    args = parse_args(["--allowed-s3-bucket", "ckpts", "--allowed-s3-endpoint", "http://MINIO:9000/"])
    with pytest.raises(StorageCheckError) as e:
        check_checkpoint_storage(s3_config(bucket, endpoint), None, _allowed_s3(args))
    message = str(e.value)
    assert "\n" not in message and named in message, message
    assert "buckets ckpts; endpoints http://minio:9000" in message
    assert "--allowed-s3-bucket" in message


def test_scheduler_allows_no_s3_storage_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PEDL_SCHEDULER_ALLOWED_S3_BUCKET", raising=False)
    with pytest.raises(StorageCheckError, match="buckets none; endpoints aws"):
        check_checkpoint_storage(s3_config("ckpts"), None, _allowed_s3(parse_args([])))
    monkeypatch.setenv("PEDL_SCHEDULER_ALLOWED_S3_BUCKET", "a,b")
    assert _allowed_s3(parse_args([])).buckets == {"a", "b"}


def test_store_allows_only_its_own_bucket_and_endpoint_by_default() -> None:
    own = parse_config(
        ["--storage", "s3", "--s3-bucket", "mine", "--s3-endpoint-url", "http://weed:8333"], env={}
    )
    assert own.allowed_s3 is None  # the resolver falls back to the default backend's own settings
    assert S3Allowance.from_store(own.s3) == S3Allowance.of(["mine"], ["http://weed:8333"])
    listed = parse_config(["--allowed-s3-bucket", "x", "--allowed-s3-bucket", "y"], env={})
    assert listed.allowed_s3 == S3Allowance.of(["x", "y"], ["aws"])


def test_store_refuses_an_unlisted_bucket_on_every_use(tmp_path) -> None:
    resolver = BackendResolver(LocalFilesystemBackend(tmp_path))
    with pytest.raises(InvalidArgument, match="buckets none; endpoints none") as e:
        resolver.resolve({"type": "s3", "bucket": "anyone", "endpoint_url": "http://127.0.0.1:1"})
    assert "pedl-checkpoint-store --allowed-s3-bucket" in str(e.value)
    listed = BackendResolver(LocalFilesystemBackend(tmp_path), allowed_s3=S3Allowance.of(["okay"], ["aws"]))
    with pytest.raises(InvalidArgument, match="endpoint_url http://127.0.0.1:1 is not among"):
        listed.resolve({"type": "s3", "bucket": "okay", "endpoint_url": "http://127.0.0.1:1"})
