"""The harness's restore path, timed from a run's start to its first batch: download a checkpoint
(pedl's client, as the harness fetches it, or boto3 straight from S3), build the trial, load the
checkpoint, train one batch. The same model and files both ways; only the download differs."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pedl.checkpoints import CheckpointStoreClient
from pedl.checkpoints.files import walk_files
from pedl.harness.build import start_trial

MODEL = """
import torch
from torch import nn
from pedl.pytorch import DataLoader, PyTorchTrial

FEATURES = {features}


class Big(PyTorchTrial):
    def build_model(self, hparams):
        return nn.Linear(FEATURES, FEATURES, bias=False)

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def losses(self, predictions, targets):
        return nn.functional.mse_loss(predictions, targets)

    def batch_size(self):
        return 2

    def validation_metrics(self, predictions, targets, losses):
        return {{"error": losses}}


def make_data_loaders(experiment_config, hparams):
    x = torch.randn(8, FEATURES)
    data = torch.utils.data.TensorDataset(x, x)
    return DataLoader(data, batch_size=2), DataLoader(data, batch_size=2)
"""

CONFIG: dict[str, Any] = {
    "hyperparameters": {},
    "searcher": {"name": "single", "metric": "error", "max_length": {"batches": 4}},
    "batches_per_step": 1,
}


class RestorePath:
    """A model whose checkpoint is about `size` bytes, stored once through pedl and once by boto3."""

    def __init__(self, work: Path, size: int, client: CheckpointStoreClient, s3: Any, bucket: str) -> None:
        self.work, self.client, self.s3, self.bucket = work, client, s3, bucket
        self.model_dir = work / "restore-model"
        self.model_dir.mkdir()
        features = int(math.sqrt(size / 4))  # float32 weights, no optimizer state (plain SGD)
        (self.model_dir / "model_def.py").write_text(MODEL.format(features=features))
        saved = work / "restore-saved"
        controller = start_trial(self.model_dir, dict(CONFIG), {}, seed=0)
        controller.train_until(1)
        controller.save(saved)
        self.files = [rel for rel, _ in walk_files(saved)]
        self.bytes = sum(path.stat().st_size for _, path in walk_files(saved))
        self.uuid = client.upload(saved, experiment_id=3, trial_id=1, total_batches=1).uuid
        for rel, path in walk_files(saved):
            s3.upload_file(str(path), bucket, f"restore/{rel}")
        shutil.rmtree(saved)

    def run(self, way: str, target: Path) -> float:
        """Seconds from the start to the first batch after restoring, downloading with `way`."""
        downloads: dict[str, Callable[[], None]] = {
            "pedl": lambda: self.client.download(self.uuid, target),
            "boto3": lambda: self._boto3(target),
        }
        started = time.perf_counter()
        downloads[way]()
        controller = start_trial(self.model_dir, dict(CONFIG), {}, seed=0, checkpoint_dir=target)
        controller.train_until(controller.batches_trained + 1)
        elapsed = time.perf_counter() - started
        shutil.rmtree(target)
        return elapsed

    def _boto3(self, target: Path) -> None:
        for rel in self.files:
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            self.s3.download_file(self.bucket, f"restore/{rel}", str(target / rel))

    def close(self) -> None:
        self.client.delete(self.uuid)
