"""TensorFlowTrial as seed 003 describes it, on a real local cluster through the `pedl` CLI.

The model definitions in tf_models/ are written from the seed text: `make_data_loaders` returns a
pair of batched `tf.data.Dataset`s, `build_graph(record, is_training)` returns named tensors with
"loss" among them, `validation_metrics`/`training_metrics` name them, `optimizer` is a
`tf.train`-style optimizer (`tf.compat.v1.train` here: TensorFlow 2 keeps them there), and
`session_config` returns a ConfigProto. Every one must COMPLETE and, killed after its first
checkpoint, resume to exactly the same metrics.

Where the seed is silent or loose, what a PEDL 0.9 user would expect:
- "Metrics for each step are computed by averaging over batches" holds for non-scalar metrics
  too: a vector metric is averaged element-wise and reported as a list.
- The training dataset is not repeated by the user: PEDL starts another epoch when it runs out.
- The seed's "Validation steps" paragraph says validation runs `training_metrics()`; that is a
  slip for `validation_metrics()` (the interface section says so), so validation reports
  exactly the names `validation_metrics()` lists.
- `.pedlignore` (seed 000) keeps its paths out of the uploaded model definition.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance._tf_support import CliCluster, cli_cluster, completes_and_resumes_exactly, history

pytestmark = pytest.mark.integration

MODELS = Path(__file__).parent / "tf_models"


def pedl09_config(metric: str, smaller_is_better: bool, **extra: object) -> dict:
    """A PEDL 0.9 style config: lengths in steps, batches_per_step, periods in steps."""
    return {
        "description": "tensorflow seed conformance",
        "hyperparameters": {
            "learning_rate": {"type": "const", "val": 0.05},
            "batch_size": {"type": "const", "val": 16},
        },
        "searcher": {
            "name": "single",
            "metric": metric,
            "smaller_is_better": smaller_is_better,
            "max_steps": 12,
        },
        "batches_per_step": 8,
        "min_validation_period": 4,
        "min_checkpoint_period": 2,
        **extra,
    }


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> Iterator[CliCluster]:
    with cli_cluster(tmp_path_factory.mktemp("tf-seed")) as cli:
        yield cli


def test_tuple_records_with_training_metrics_session_config_and_downloaded_data(cli, tmp_path) -> None:
    model = tmp_path / "tuple_records"
    shutil.copytree(MODELS / "tuple_records", model, ignore=shutil.ignore_patterns("__pycache__"))
    (model / "raw_data").mkdir()
    (model / "raw_data" / "huge.csv").write_bytes(b"0," * 4096)
    (model / "weights.bin").write_bytes(b"\0" * 4096)
    described = completes_and_resumes_exactly(cli, model, pedl09_config("error", True))
    runs = history(described)
    assert [b for b, _ in runs["steps"]] == [8 * i for i in range(1, 13)]
    for _, metrics in runs["steps"]:
        assert set(metrics) == {"loss", "accuracy", "per_class_hits"}
        assert len(metrics["per_class_hits"]) == 3
    assert [b for b, _ in runs["validations"]] == [32, 64, 96]
    assert all(set(m) == {"error", "per_class_hits"} for _, m in runs["validations"])
    assert runs["validations"][-1][1]["error"] < runs["validations"][0][1]["error"]

    downloaded = tmp_path / "downloaded"
    exp_id = described["experiment"]["id"]
    cli.pedl("experiment", "download-model-def", str(exp_id), "-o", str(downloaded))
    assert (downloaded / "model.py").is_file() and (downloaded / ".pedlignore").is_file()
    assert not (downloaded / "raw_data").exists() and not (downloaded / "weights.bin").exists()


def test_dict_records_through_a_nested_entrypoint_with_defaults(cli) -> None:
    config = pedl09_config(
        "mse", True, entrypoint="lib.trial:trial_classes.NestedTrial", data={"train_size": 96}
    )
    runs = history(completes_and_resumes_exactly(cli, MODELS / "nested_entrypoint", config))
    # No training_metrics(): the loss alone.
    assert all(set(m) == {"loss"} for _, m in runs["steps"])
    assert all(set(m) == {"mse", "mae"} for _, m in runs["validations"])


def test_a_single_file_model_definition_with_nested_records(cli) -> None:
    config = pedl09_config("accuracy", False)
    runs = history(completes_and_resumes_exactly(cli, MODELS / "single_file.py", config))
    assert all(set(m) == {"loss", "feature_means"} and len(m["feature_means"]) == 5 for _, m in runs["steps"])
    assert all(set(m) == {"accuracy", "loss"} for _, m in runs["validations"])
