"""Keras Trial APIs from their documentation: PEDL 0.11's `pedl.frameworks.keras.TFKerasTrial`
(`__init__(self, hparams)`, `build_model(self, hparams)`, `session_config`, `data.KerasDataAdapter`,
`wrap_dataset`) and Determined's `det.keras.TFKerasTrial` with its context (`wrap_model`,
`wrap_optimizer`, `wrap_dataset`, `get_hparam`, `get_per_slot_batch_size`, `get_data_config`,
`build_training_data_loader` returning a tf.data.Dataset or a Sequence)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from pedl.config import parse_experiment_config
from pedl.config.test_mode import test_mode_config as minimal
from pedl.experimental import run_local
from pedl.harness.build import load_for_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(directory: Path, config: str | None = None):
    parsed = minimal(parse_experiment_config(config or str(directory / "const.yaml")))
    model_def = load_for_config(directory, parsed.raw)
    return model_def, run_local(parsed, model_def, verify_restore=True)


def test_a_pedl011_tfkeras_trial_with_a_data_adapter_trains_and_restores(tmp_path) -> None:
    model = shutil.copytree(EXAMPLES / "digits_keras_pedl011", tmp_path / "pedl011_keras")
    _, result = run(model)
    assert result.state == "COMPLETED"
    assert set(result.trials[0].validations[-1][1]) == {"val_loss", "val_accuracy"}


def test_a_determined_tfkeras_trial_uses_its_context_and_restores(tmp_path) -> None:
    model = shutil.copytree(EXAMPLES / "digits_determined_keras", tmp_path / "det_keras")
    source = (model / "model_def.py").read_text()
    source = source.replace(
        "    def build_model(self) -> keras.Model:\n",
        "    def build_model(self) -> keras.Model:\n"
        "        CALLS.append((self.context.get_per_slot_batch_size(), self.context.get_data_config(),\n"
        "                      self.context.distributed.get_rank(), self.context.distributed.get_size()))\n",
    )
    (model / "model_def.py").write_text(source + "\n\nCALLS = []\n")
    config = (model / "const.yaml").read_text() + "data:\n  url: http://127.0.0.1:9/digits\n"
    model_def, result = run(model, config)
    assert result.state == "COMPLETED"
    assert set(result.trials[0].steps[0][1]) == {"loss", "accuracy"}
    calls = sys.modules[model_def.trial_class.__module__].CALLS
    assert calls[0] == (32, {"url": "http://127.0.0.1:9/digits"}, 0, 1)


def test_an_uncompiled_model_is_refused_naming_build_model(tmp_path) -> None:
    model = shutil.copytree(EXAMPLES / "digits_determined_keras", tmp_path / "uncompiled")
    source = (model / "model_def.py").read_text().replace("        model.compile(", "        dict(")
    (model / "model_def.py").write_text(source)
    with pytest.raises(ValueError, match=r"DigitsTrial\.build_model .*must return a compiled model"):
        run(model)


def test_keras_callbacks_are_refused_naming_the_method(tmp_path) -> None:
    model = shutil.copytree(EXAMPLES / "digits_determined_keras", tmp_path / "callbacks")
    source = (model / "model_def.py").read_text()
    source += "\n    def keras_callbacks(self):\n        return [keras.callbacks.History()]\n"
    (model / "model_def.py").write_text(source)
    with pytest.raises(TypeError, match=r"DigitsTrial\.keras_callbacks .*does not run Keras callbacks"):
        run(model)


def test_a_determined_tfkeras_trial_missing_its_data_loaders_is_refused_naming_them(tmp_path) -> None:
    model = shutil.copytree(EXAMPLES / "digits_determined_keras", tmp_path / "nodata")
    source = (model / "model_def.py").read_text().replace("def build_validation_data_loader", "def _unused")
    (model / "model_def.py").write_text(source)
    with pytest.raises(Exception, match="build_validation_data_loader"):
        run(model)


def with_callbacks(tmp_path: Path, example: str, callbacks: str, imports: str) -> Path:
    model = shutil.copytree(EXAMPLES / example, tmp_path / f"tb_{example}")
    init = "model_def.py" if (model / "model_def.py").is_file() else "__init__.py"
    future = "from __future__ import annotations\n"
    source = (model / init).read_text().replace(future, future + imports + "\n", 1)
    source += f"\n    def keras_callbacks(self):\n        return [{callbacks}]\n"
    (model / init).write_text(source)
    return model


def test_a_determined_trial_returning_the_tensorboard_callback_trains_unchanged(tmp_path) -> None:
    """Determined's docs: `keras_callbacks()` returns `det.keras.callbacks.TensorBoard(...)` (or the
    older `det.keras.TFKerasTensorBoard`) with tf.keras.callbacks.TensorBoard's arguments."""
    callbacks = (
        'callbacks.TensorBoard(update_freq="batch", profile_batch=0, histogram_freq=0), '
        "det_keras.TFKerasTensorBoard(write_graph=False)"
    )
    model = with_callbacks(
        tmp_path, "digits_determined_keras", callbacks, "from determined.keras import callbacks"
    )
    _, result = run(model)
    assert result.state == "COMPLETED"
    assert set(result.trials[0].validations[-1][1]) == {"val_loss", "val_accuracy"}


def test_a_pedl011_trial_returning_tfkeras_tensorboard_trains_unchanged(tmp_path) -> None:
    model = with_callbacks(
        tmp_path,
        "digits_keras_pedl011",
        "TFKerasTensorBoard()",
        "from pedl.frameworks.keras import TFKerasTensorBoard",
    )
    _, result = run(model)
    assert result.state == "COMPLETED"


@pytest.mark.parametrize(
    ("argument", "named"),
    [("profile_batch=(2, 4)", "profile_batch=(2, 4)"), ("write_images=True", "write_images=True")],
)
def test_tensorboard_options_beyond_metrics_and_histograms_are_refused_naming_them(
    tmp_path, argument: str, named: str
) -> None:
    model = with_callbacks(
        tmp_path,
        "digits_determined_keras",
        f"callbacks.TensorBoard({argument})",
        "from determined.keras import callbacks",
    )
    with pytest.raises(ValueError, match=re.escape(f"TensorBoard({named})")):
        run(model)


def test_histograms_asked_of_the_tensorboard_callback_are_written_by_keras_at_each_validation(
    tmp_path, monkeypatch
) -> None:
    """Determined's iris example: `TensorBoard(histogram_freq=1)`; Keras logs the weights'
    histograms into the run's TensorBoard directory, whatever `log_dir` says."""
    logdir = tmp_path / "run-tensorboard"
    monkeypatch.setenv("PEDL_TENSORBOARD_DIR", str(logdir))
    model = with_callbacks(
        tmp_path,
        "digits_determined_keras",
        'callbacks.TensorBoard(log_dir="/nonexistent/logs", update_freq="batch", profile_batch=0, '
        "histogram_freq=1)",
        "from determined.keras import callbacks",
    )
    _, result = run(model)
    assert result.state == "COMPLETED"
    assert not Path("/nonexistent/logs").exists()
    tags: dict[str, set[int]] = {}
    import tensorflow as tf

    for events in sorted((logdir / "train").glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                tags.setdefault(value.tag, set()).add(event.step)
    histograms = {tag for tag in tags if tag.endswith("/histogram")}
    assert any("kernel" in tag for tag in histograms), sorted(tags)
    validations = len(result.trials[0].validations)
    assert all(len(tags[tag]) >= min(validations, 2) for tag in histograms), tags


def test_keras2s_lr_and_metrics_third_in_compile_are_read_as_keras_2_did(tmp_path) -> None:
    """Determined's iris example (0.12 to 0.20) and PEDL 0.11's: `RMSprop(lr=...)` and
    `model.compile(optimizer, loss, [metric])`, Keras 2's spelling and order."""
    model = shutil.copytree(EXAMPLES / "digits_determined_keras", tmp_path / "lr")
    source = (model / "model_def.py").read_text()
    compiled = """        model.compile(
            optimizer=optimizer,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )"""
    assert compiled in source
    source = source.replace(
        compiled,
        "        model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True),\n"
        "                      [keras.metrics.sparse_categorical_accuracy])",
    )
    old = 'keras.optimizers.Adam(self.context.get_hparam("learning_rate"))'
    assert old in source
    source = source.replace(old, 'keras.optimizers.Adam(lr=self.context.get_hparam("learning_rate"))')
    source = source.replace(
        "        return model\n",
        "        LEARNING_RATES.append(float(model.optimizer.learning_rate))\n        return model\n",
        1,
    )
    (model / "model_def.py").write_text(source + "\n\nLEARNING_RATES = []\n")
    config = (model / "const.yaml").read_text().replace("val_accuracy", "val_sparse_categorical_accuracy")
    model_def, result = run(model, config)
    assert result.state == "COMPLETED"
    rates = sys.modules[model_def.trial_class.__module__].LEARNING_RATES
    wanted = yaml.safe_load((model / "const.yaml").read_text())["hyperparameters"]["learning_rate"]
    assert rates and rates[0] == pytest.approx(wanted)
    assert set(result.trials[0].validations[-1][1]) == {"val_loss", "val_sparse_categorical_accuracy"}
