"""EstimatorTrial on a real cluster, in the TensorFlow 2.15 environment that scripts/build-tf215-env
builds and an agent offers as `tf215`; the scheduler refuses environments no agent offers."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import grpc
import pytest
import yaml
from test_cluster import stub, submit, wait
from test_faults import trial_history

from pedl.checkpoints import CheckpointStoreClient
from pedl.v1 import common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "digits_estimator"


@pytest.fixture(scope="module")
def tf215_python() -> str:
    """The environment's interpreter; built on first use (pip), cached by the script's stamp file."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(ROOT / "scripts" / "build-tf215-env")], capture_output=True, text=True, timeout=900
        )
    except subprocess.TimeoutExpired:
        pytest.skip("scripts/build-tf215-env took over 15 minutes (pip could not fetch the packages?)")
    if done.returncode != 0:
        pytest.skip(f"scripts/build-tf215-env failed (cannot fetch TensorFlow 2.15?):\n{done.stderr[-2000:]}")
    print(f"tf215 environment ready in {time.monotonic() - started:.1f}s")
    return done.stdout.strip().splitlines()[-1]


def config(environment: str = "tf215") -> str:
    raw = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    raw["searcher"].pop("max_steps")
    raw["searcher"]["max_length"] = {"batches": 40}
    raw.update(
        environment=environment,
        batches_per_step=10,
        min_validation_period={"batches": 20},
        min_checkpoint_period={"batches": 20},
    )
    return yaml.safe_dump(raw)


def test_an_estimator_trial_completes_in_the_tf215_environment(tmp_path, tf215_python) -> None:
    agent_args = ["--environment", f"tf215={tf215_python}"]
    with local_cluster(tmp_path / "cluster", agent_args=agent_args, preload_tensorflow=True) as cluster:
        with pytest.raises(grpc.RpcError) as refused:
            submit(cluster, EXAMPLE, config("tf999"))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "'tf999' is not offered by any connected agent" in refused.value.details()
        assert "default, tf215" in refused.value.details()

        exp_id = submit(cluster, EXAMPLE, config())
        result = wait(cluster, exp_id, timeout=240)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        steps, validations = trial_history(cluster, exp_id)
        assert [b for b, _ in steps] == [10, 20, 30, 40]
        assert [b for b, _ in validations] == [20, 40]
        assert validations[-1][1]["accuracy"] > 0.5
        detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=result.trials[0].id))
        assert detail.checkpoints[-1].total_batches == 40
        with CheckpointStoreClient(cluster.store.address) as store:
            files = [f.path for f in store.get(detail.checkpoints[-1].uuid).files]
        # One SavedModel per build_serving_input_receiver_fns() entry: serving/<timestamp>/.
        assert any(p.startswith("serving/") and p.endswith("/saved_model.pb") for p in files), files
        assert any(p.startswith("estimator/model.ckpt-40.") for p in files), files


def test_the_estimator_step_benchmark_runs_in_smoke_mode(tf215_python) -> None:
    done = subprocess.run(
        [tf215_python, str(ROOT / "benchmarks" / "estimator_steps.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "one train() call:" in done.stdout and "ratio:" in done.stdout, done.stdout


OPTIMIZER_MODEL = """
import numpy as np
import tensorflow as tf
from pedl.tensorflow import EstimatorTrial

TRAIN_CALLS = []
FORMS = {
    "instance": lambda: tf.keras.optimizers.legacy.Adagrad(0.1),
    "string": lambda: "Adagrad",
    "callable": lambda: (lambda: tf.keras.optimizers.legacy.Adagrad(0.1)),
}


def train_input_fn():
    TRAIN_CALLS.append(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    return tf.data.Dataset.from_tensor_slices(({"x": x}, (x[:, 0] > 0).astype("int32"))).batch(8)


def eval_input_fn():
    x = np.random.default_rng(1).normal(size=(32, 4)).astype("float32")
    return tf.data.Dataset.from_tensor_slices(({"x": x}, (x[:, 0] > 0).astype("int32"))).batch(8)


class FormsTrial(EstimatorTrial):
    def build_estimator(self, hparams):
        return tf.estimator.DNNClassifier(
            hidden_units=[8],
            feature_columns=[tf.feature_column.numeric_column("x", shape=[4])],
            optimizer=FORMS[hparams["form"]](),
            dropout=0.3,
        )

    def build_train_spec(self, hparams):
        if hparams.get("broken") == "tuple":
            return tf.estimator.TrainSpec(input_fn=lambda: tf.compat.v1.data.make_one_shot_iterator(
                train_input_fn()).get_next())
        if hparams.get("broken") == "empty":
            return tf.estimator.TrainSpec(input_fn=lambda: train_input_fn().take(0))
        return tf.estimator.TrainSpec(input_fn=train_input_fn)

    def build_validation_spec(self, hparams):
        return tf.estimator.EvalSpec(input_fn=eval_input_fn, steps=None)
"""

DRIVER = """
import json, sys, tempfile
from pathlib import Path
from pedl.harness.build import start_trial

model, out = Path(sys.argv[1]), {}
for form in ("instance", "string", "callable"):
    c = start_trial(model, {}, {"form": form}, seed=3)
    calls = sys.modules[c.trial.__module__].TRAIN_CALLS
    c.train_until(8)
    c.validate()
    c.train_until(16)
    calls_before_save = len(calls)
    saved = Path(tempfile.mkdtemp()) / "ckpt"
    saved.mkdir()
    c.save(saved)
    after = [c.train_until(24).metrics["loss"], c.validate()["accuracy"]]
    c.close()
    r = start_trial(model, {}, {"form": form}, seed=3, checkpoint_dir=saved)
    resumed = [r.train_until(24).metrics["loss"], r.validate()["accuracy"]]
    r.close()
    out[form] = {"calls_before_save": calls_before_save, "after": after, "resumed": resumed}
for broken in ("tuple", "empty"):
    c = start_trial(model, {}, {"form": "string", "broken": broken}, seed=3)
    try:
        c.train_until(8)
        out[broken] = "trained"
    except Exception as exc:
        out[broken] = f"{type(exc).__name__}: {exc}"
    c.close()
print("RESULT " + json.dumps(out))
"""


def test_every_optimizer_form_trains_in_one_call_between_checkpoints_and_resumes_exactly(
    tmp_path, tf215_python
) -> None:
    model = tmp_path / "forms"
    model.mkdir()
    (model / "__init__.py").write_text(OPTIMIZER_MODEL)
    done = subprocess.run(
        [tf215_python, "-c", DRIVER, str(model)], capture_output=True, text=True, timeout=400, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    for form in ("instance", "string", "callable"):
        # Two steps and a validation in between: the training input_fn was called (the graph built) once.
        assert result[form]["calls_before_save"] == 1, result
        assert result[form]["resumed"] == result[form]["after"], (form, result)
    assert "must return a tf.data.Dataset" in result["tuple"], result
    assert "yields no data" in result["empty"], result
