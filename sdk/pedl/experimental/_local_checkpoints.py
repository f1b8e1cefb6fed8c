"""Checkpoints of local-mode trials: directories on this machine, with the same metadata as the store."""

from __future__ import annotations

import hashlib
import shutil
import uuid
from pathlib import Path

from pedl._timeutil import utc_now
from pedl.v1 import common_pb2


class LocalCheckpoints:
    """A `pedl.harness.workloads.CheckpointStorage` under one root directory."""

    def __init__(self, root: Path, trial_id: int) -> None:
        self.root = root
        self.trial_id = trial_id

    def store(self, directory: Path, total_batches: int) -> common_pb2.Checkpoint:
        ckpt_uuid = str(uuid.uuid4())
        target = self.root / ckpt_uuid
        partial = self.root / f".{ckpt_uuid}.partial"
        shutil.copytree(directory, partial)
        files = []
        for path in sorted(p for p in partial.rglob("*") if p.is_file()):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            files.append(
                common_pb2.FileInfo(
                    path=path.relative_to(partial).as_posix(), size=path.stat().st_size, sha256=digest
                )
            )
        partial.rename(target)  # visible only once complete
        return common_pb2.Checkpoint(
            uuid=ckpt_uuid,
            trial_id=self.trial_id,
            total_batches=total_batches,
            files=files,
            state=common_pb2.CHECKPOINT_STATE_COMPLETED,
            created_at=utc_now(),
            total_size=sum(f.size for f in files),
        )

    def fetch(self, uuid: str, directory: Path) -> None:
        shutil.copytree(self.root / uuid, directory, dirs_exist_ok=True)

    def path(self, uuid: str) -> Path:
        return self.root / uuid
