"""EstimatorTrial as seed 003 describes it, on a real local cluster through the `pedl` CLI, in the
TensorFlow 2.15 environment (`tf.estimator` is gone since 2.16) that an agent offers as `tf215`.

The model definitions in estimator_models/ are written from the seed text: `build_estimator`
returns a premade or custom Estimator, `build_train_spec`/`build_validation_spec` return a
TrainSpec/EvalSpec whose input_fn returns a `tf.data.Dataset`, and the optional
`build_serving_input_receiver_fns` names SavedModels exported with every checkpoint. Every one
must COMPLETE and, killed after its first checkpoint, resume to exactly the same metrics.

Where the seed is silent or loose, what a PEDL 0.9 user would expect:
- The seed says nothing of the optimizer: any form the Estimator accepts works (an instance, as
  TensorFlow's docs show for premade Estimators; a name such as "Ftrl"; a custom model_fn's own).
- The input_fn's dataset is not repeated by the user: PEDL repeats it for training; an EvalSpec
  with `steps=None` validates on one whole pass, with `steps=N` on N batches.
- `max_steps` of the TrainSpec is ignored (the seed says so): the searcher decides the length.
- A metric whose value is a tensor (`tf.compat.v1.metrics.mean_tensor`) is reported as a list.
- The SavedModels live under `<key>/<timestamp>/` of the checkpoint: `export_saved_model`
  writes a timestamped directory under the path it is given.
- download_data (documented for PyTorchTrial) is honoured for every interface, as in PEDL 0.9.
- "Exactly" includes dropout: a premade DNNClassifier with dropout resumes to the same metrics.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance._tf_support import ROOT, CliCluster, cli_cluster, completes_and_resumes_exactly, history

from pedl.checkpoints import CheckpointStoreClient

pytestmark = pytest.mark.integration

MODELS = Path(__file__).parent / "estimator_models"


def pedl09_config(metric: str, smaller_is_better: bool, **extra: object) -> dict:
    return {
        "description": "estimator seed conformance",
        "environment": "tf215",
        "hyperparameters": {
            "learning_rate": {"type": "const", "val": 0.1},
            "batch_size": {"type": "const", "val": 16},
        },
        "searcher": {
            "name": "single",
            "metric": metric,
            "smaller_is_better": smaller_is_better,
            "max_steps": 8,
        },
        "batches_per_step": 5,
        # Validations between checkpoints run inside the long train() call; a checkpoint ends it.
        "min_validation_period": 2,
        "min_checkpoint_period": 4,
        **extra,
    }


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> Iterator[CliCluster]:
    done = subprocess.run(
        [str(ROOT / "scripts" / "build-tf215-env")], capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        pytest.skip(f"scripts/build-tf215-env failed (cannot fetch TensorFlow 2.15?):\n{done.stderr[-2000:]}")
    python = done.stdout.strip().splitlines()[-1]
    with cli_cluster(tmp_path_factory.mktemp("estimator-seed"), ["--environment", f"tf215={python}"]) as cli:
        yield cli


def test_a_premade_estimator_with_an_optimizer_instance_exports_saved_models(cli, tmp_path) -> None:
    model = tmp_path / "premade"
    shutil.copytree(MODELS / "premade", model, ignore=shutil.ignore_patterns("__pycache__"))
    (model / "raw_data").mkdir()
    (model / "raw_data" / "huge.csv").write_bytes(b"0," * 4096)
    (model / "weights.bin").write_bytes(b"\0" * 4096)
    described = completes_and_resumes_exactly(cli, model, pedl09_config("accuracy", False))
    runs = history(described)
    assert [b for b, _ in runs["steps"]] == [5 * i for i in range(1, 9)]
    assert all(set(m) == {"loss"} for _, m in runs["steps"])
    assert [b for b, _ in runs["validations"]] == [10, 20, 30, 40]
    assert {"accuracy", "average_loss", "loss"} <= set(runs["validations"][-1][1])

    (trial,) = described["trials"]
    last = max(trial["checkpoints"], key=lambda c: int(c["total_batches"]))
    with CheckpointStoreClient(cli.cluster.store.address) as store:
        files = [f.path for f in store.get(last["uuid"]).files]
    for key in ("raw", "parsing"):
        assert any(p.startswith(f"{key}/") and p.endswith("/saved_model.pb") for p in files), files

    downloaded = tmp_path / "downloaded"
    cli.pedl("experiment", "download-model-def", str(described["experiment"]["id"]), "-o", str(downloaded))
    assert (downloaded / "model.py").is_file() and (downloaded / ".pedlignore").is_file()
    assert not (downloaded / "raw_data").exists() and not (downloaded / "weights.bin").exists()


def test_a_nested_entrypoint_with_a_named_optimizer_and_eval_steps(cli) -> None:
    config = pedl09_config("accuracy", False, entrypoint="lib.trial:classes.LinearTrial")
    runs = history(completes_and_resumes_exactly(cli, MODELS / "nested_entrypoint", config))
    # TrainSpec(max_steps=3) is ignored: the searcher's 8 steps of 5 batches are trained.
    assert [b for b, _ in runs["steps"]][-1] == 40
    assert all("accuracy" in m for _, m in runs["validations"])


def test_a_custom_estimator_in_a_single_file_reports_scalar_and_vector_metrics(cli) -> None:
    runs = history(
        completes_and_resumes_exactly(cli, MODELS / "custom_single_file.py", pedl09_config("accuracy", False))
    )
    for _, metrics in runs["validations"]:
        assert set(metrics) == {"accuracy", "loss", "mean_logits"}
        assert len(metrics["mean_logits"]) == 2
