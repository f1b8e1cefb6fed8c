"""Determined 0.38's Keras API: a script's own `model.fit()` with `det.keras.DeterminedCallback`.
Real scripts in real processes: under the harness's Core API server (what a trial reports and
stores, and a stop reaching fit), off a cluster (checkpoints in a local directory: a resume with the
same continue_id against a warm start with another), in pedl's Keras 3 environment and in
TensorFlow 2.15's (Keras 2, which Determined 0.38's images held); `determined.launch.tensorflow`'s
TF_CONFIG on one and two slots; and the bad arguments, each refused in one line naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from core_api_rig import StoredCheckpoints, start_script

from pedl._metrics import from_struct
from pedl.harness.compat import compat_path, ensure_determined_importable, pythonpath_with_compat
from pedl.harness.core_api_trial import ScriptSettings
from pedl.v1 import common_pb2

ROOT = Path(__file__).resolve().parents[3]
KIND = common_pb2.WorkloadKind
REPORT = common_pb2.ScriptReportKind

# 16 records at batch size 4: 4 batches an epoch.
MODEL = """
import json, sys
import numpy as np
import keras
import determined as det
import determined.keras


def model():
    inputs = keras.Input(shape=(4,))
    m = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(inputs))
    m.compile(keras.optimizers.SGD(0.1), keras.losses.CategoricalCrossentropy(),
              metrics=[keras.metrics.CategoricalAccuracy()])
    return m


rng = np.random.default_rng(0)
X = rng.random((16, 4)).astype("float32")
Y = np.eye(3, dtype="float32")[rng.integers(0, 3, 16)]
"""

ON_CLUSTER = (
    MODEL
    + """
info = det.get_cluster_info()
with det.core.init() as core:
    m = model()
    callback = det.keras.DeterminedCallback(core, checkpoint=None, continue_id=info.trial.trial_id,
                                            checkpoint_epochs=CHECKPOINT_EPOCHS)
    board = det.keras.TensorBoard(core, "ignored-logs", histogram_freq=1, update_freq="batch")
    history = m.fit(X, Y, batch_size=4, validation_data=(X, Y), epochs=EPOCHS, verbose=0,
                    callbacks=[callback, board])
print(json.dumps({"epochs_run": len(history.epoch)}), flush=True)
"""
)


def _run_on_cluster(tmp_path: Path, epochs: int, checkpoint_epochs: int, target: int):
    (tmp_path / "model").mkdir()
    script = ON_CLUSTER.replace("CHECKPOINT_EPOCHS", str(checkpoint_epochs)).replace("EPOCHS", str(epochs))
    (tmp_path / "model" / "train.py").write_text(script)
    settings = ScriptSettings(
        command=[sys.executable, "train.py"],
        model_dir=tmp_path / "model",
        chief=True,
        searcher_metric="categorical_accuracy",
    )
    stored = StoredCheckpoints()
    trial, server = start_script(tmp_path, settings, stored)
    reports: list[common_pb2.ScriptReport] = []
    while True:  # a workload also ends at each stored checkpoint
        step = trial.run_workload(
            common_pb2.Workload(
                kind=KIND.WORKLOAD_KIND_RUN_STEP, trial_id=1, run_id=1, step_id=1, total_batches=target
            )
        )
        reports += step.script_reports
        if step.script_finished or step.script_progress >= target:
            return trial, server, stored, reports


def test_fit_reports_metrics_progress_and_checkpoints_every_n_epochs_and_at_its_end(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv(
        "PEDL_TENSORBOARD_DIR", str(tmp_path / "tensorboard")
    )  # the run's, as the harness sets
    trial, server, stored, reports = _run_on_cluster(tmp_path, epochs=5, checkpoint_epochs=2, target=10**6)
    try:
        assert trial.wait_for_exit() == 0
        training = [r for r in reports if r.kind == REPORT.SCRIPT_REPORT_KIND_TRAINING]
        validation = [r for r in reports if r.kind == REPORT.SCRIPT_REPORT_KIND_VALIDATION]
        # One training report per epoch (train_metrics_report_period="epoch"), at batches trained.
        assert [r.steps_completed for r in training] == [4, 8, 12, 16, 20]
        first = from_struct(training[0].metrics)
        assert {"loss", "categorical_accuracy"} <= set(first) and not any(k.startswith("val_") for k in first)
        assert (first["epochs"], first["batches"]) == (1, 4)
        # Validation after every epoch, under the names Keras's evaluation gives them (Determined's)
        # and fit's val_ names.
        assert [r.steps_completed for r in validation] == [4, 8, 12, 16, 20]
        last = from_struct(validation[-1].metrics)
        names = {"loss", "categorical_accuracy", "val_loss", "val_categorical_accuracy", "epochs", "batches"}
        assert set(last) == names and (last["epochs"], last["batches"]) == (5, 20)
        assert last["val_categorical_accuracy"] == last["categorical_accuracy"]
        # Every 2 epochs, and at the end of fit (epoch 5).
        assert stored.progress == [8, 16, 20]
        # det.keras.TensorBoard writes into the run's TensorBoard directory, whatever log_dir says.
        assert list((tmp_path / "tensorboard" / "train").glob("events.out.tfevents.*"))
        assert list((tmp_path / "tensorboard" / "validation").glob("events.out.tfevents.*"))
        assert not (tmp_path / "model" / "ignored-logs").exists()
    finally:
        trial.kill()
        server.close()


def test_a_stop_ends_fit_at_the_next_epoch_after_storing_a_checkpoint(tmp_path) -> None:
    trial, server, stored, _ = _run_on_cluster(tmp_path, epochs=1000, checkpoint_epochs=0, target=8)
    try:
        trial.close()  # the searcher is done with it (or a pause): should_preempt() answers True
        assert trial.wait_for_exit() == 0
        # checkpoint_epochs=0: none on a schedule, one when fit stops, at an epoch boundary.
        assert len(stored.progress) == 1 and 8 <= stored.progress[0] < 4000 and stored.progress[0] % 4 == 0
    finally:
        trial.kill()
        server.close()


OFF_CLUSTER = (
    MODEL
    + """
storage, checkpoint, continue_id, epochs = sys.argv[1], sys.argv[2] or None, sys.argv[3], int(sys.argv[4])
with det.core.init(checkpoint_storage=storage) as core:
    m = model()
    seen = {}
    record = keras.callbacks.LambdaCallback(
        on_train_begin=lambda logs: seen.update(start=[w.tolist() for w in m.get_weights()]))
    callback = det.keras.DeterminedCallback(core, checkpoint=checkpoint, continue_id=continue_id,
                                            checkpoint_epochs=0)
    history = m.fit(X, Y, batch_size=4, epochs=epochs, verbose=0, callbacks=[callback, record])
stored = sorted(__import__("os").listdir(storage))
end = [w.tolist() for w in m.get_weights()]
print(json.dumps({"epochs": history.epoch, "start": seen["start"], "end": end, "stored": stored}))
"""
)


def _interpreters() -> list[str]:
    return ["keras3", "tf215"]


@pytest.fixture(scope="module")
def tf215_python() -> str:
    done = subprocess.run(
        [str(ROOT / "scripts" / "build-tf-env"), "2.15"], capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        pytest.skip(
            f"scripts/build-tf-env 2.15 failed (cannot fetch TensorFlow 2.15?):\n{done.stderr[-2000:]}"
        )
    return done.stdout.strip().splitlines()[-1]


def _off_cluster(python: str, tmp_path: Path, checkpoint: str, continue_id: str, epochs: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PEDL_CORE_API", "PEDL_CLUSTER_INFO"))}
    env.update(TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=pythonpath_with_compat(None))
    done = subprocess.run(
        [python, "-c", OFF_CLUSTER, str(tmp_path / "ckpts"), checkpoint, continue_id, str(epochs)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("keras_version", _interpreters())
def test_the_same_continue_id_resumes_at_the_next_epoch_another_loads_only_the_weights(
    tmp_path, keras_version: str, request: pytest.FixtureRequest
) -> None:
    python = sys.executable if keras_version == "keras3" else request.getfixturevalue("tf215_python")
    first = _off_cluster(python, tmp_path, "", "run-a", epochs=3)
    assert first["epochs"] == [0, 1, 2] and len(first["stored"]) == 1  # at the end of fit only
    uuid = first["stored"][0]
    resumed = _off_cluster(python, tmp_path, uuid, "run-a", epochs=5)
    assert resumed["epochs"] == [3, 4]  # fit's initial_epoch is overridden
    assert resumed["start"] == first["end"]
    warm = _off_cluster(python, tmp_path, uuid, "run-b", epochs=2)
    assert warm["epochs"] == [0, 1] and warm["start"] == first["end"]


def test_bad_arguments_are_refused_naming_them(tmp_path) -> None:
    ensure_determined_importable()
    import determined as det
    import determined.keras  # noqa: F401

    with det.core.init(checkpoint_storage=str(tmp_path)) as core:
        for kwargs, name in (
            ({"checkpoint_epochs": -1}, "checkpoint_epochs=-1"),
            ({"train_metrics_report_period": "batch"}, "train_metrics_report_period='batch'"),
            ({"train_metrics_report_period": 0}, "train_metrics_report_period=0"),
        ):
            with pytest.raises(ValueError, match=name):
                det.keras.DeterminedCallback(core, None, "x", **kwargs)
        with pytest.raises(ValueError, match="checkpoint=5"):
            det.keras.DeterminedCallback(core, 5, "x")  # type: ignore[arg-type]


def test_from_tf_config_without_tf_config_is_the_default_strategy_and_a_bad_one_is_refused(
    monkeypatch,
) -> None:
    ensure_determined_importable()
    import tensorflow as tf
    from determined.core import DistributedContext

    monkeypatch.delenv("TF_CONFIG", raising=False)
    distributed, strategy = DistributedContext.from_tf_config()
    assert distributed is None and strategy is tf.distribute.get_strategy()
    for raw, words in (
        ("{not json", "TF_CONFIG is not JSON"),
        (
            '{"cluster": {"worker": ["a:1"], "ps": ["b:2"]}, "task": {"type": "worker", "index": 0}}',
            "workers only",
        ),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}}', "task.index 1"),
    ):
        monkeypatch.setenv("TF_CONFIG", raw)
        with pytest.raises(ValueError, match=words):
            DistributedContext.from_tf_config()


PRINT_TF_CONFIG = "import os; print('TF_CONFIG=' + os.environ.get('TF_CONFIG', 'none'), flush=True)"


def _launcher_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "WORLD_SIZE", "RANK")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(compat_path() or ""), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def test_the_tensorflow_launcher_runs_the_command_without_tf_config_on_one_slot() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "determined.launch.tensorflow", "--", sys.executable, "-c", PRINT_TF_CONFIG],
        capture_output=True,
        text=True,
        timeout=60,
        env=_launcher_env(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "TF_CONFIG=none"
    refused = subprocess.run(
        [sys.executable, "-m", "determined.launch.tensorflow", "--"],
        capture_output=True,
        text=True,
        env=_launcher_env(),
    )
    assert refused.returncode != 0 and "no command to launch" in refused.stderr


def test_the_tensorflow_launcher_gives_each_of_two_ranks_tf_config_naming_both() -> None:
    from support.processes import free_port

    port = str(free_port())
    ranks = [
        subprocess.Popen(
            [sys.executable, "-m", "determined.launch.tensorflow", sys.executable, "-c", PRINT_TF_CONFIG],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_launcher_env(
                RANK=str(rank),
                LOCAL_RANK=str(rank),
                WORLD_SIZE="2",
                LOCAL_WORLD_SIZE="2",
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port,
            ),
        )
        for rank in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=120) for p in ranks]
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
    configs = []
    for p, (out, err) in zip(ranks, outputs, strict=True):
        assert p.returncode == 0, err[-3000:]
        configs.append(json.loads(out.strip().splitlines()[-1].removeprefix("TF_CONFIG=")))
    workers = configs[0]["cluster"]["worker"]
    assert len(set(workers)) == 2 and configs[1]["cluster"]["worker"] == workers
    assert [c["task"] for c in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
