"""Determined's PyTorchTrial, from its documentation: `import determined as det`, the context API
(wrap_model, wrap_optimizer, wrap_lr_scheduler, backward, step_optimizer, get_hparam,
get_per_slot_batch_size, get_data_config, distributed.get_rank/get_size), the early form
(build_model, optimizer, train_batch(batch, model, ...)), `det.experimental.create(trial_def=...,
context_dir=...)` as the seed document shows it, and `det.pytorch.Trainer(trial, context).fit(...)`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from determined_models import CONFIG, EVALUATE_FULL, write_determined_model

from pedl.config import parse_experiment_config
from pedl.config.test_mode import test_mode_config as minimal
from pedl.experimental import run_local
from pedl.harness.build import load_for_config
from pedl.harness.compat import compat_path, ensure_determined_importable
from pedl.model_def import ModelDefinitionError

ensure_determined_importable()


def run(directory: Path, config: str = CONFIG, test: bool = True):
    parsed = parse_experiment_config(config)
    if test:
        parsed = minimal(parsed)
    model_def = load_for_config(directory, parsed.raw)
    return model_def, run_local(parsed, model_def, verify_restore=True)


def test_a_context_trial_uses_every_documented_context_call(tmp_path) -> None:
    model_def, result = run(write_determined_model(tmp_path / "ctx"), test=False)
    assert result.state == "COMPLETED"
    trial = result.trials[0]
    assert [b for b, _ in trial.steps] == [5, 10, 15]
    assert [b for b, _ in trial.validations] == [5, 10, 15]
    calls = sys.modules[model_def.trial_class.__module__].CALLS
    assert calls[0] == ("init", 6, 6, 8, 8, {"url": "http://127.0.0.1/data"}, 0, 1, "single")
    trained = [c for c in calls if c[0] == "train_batch"]
    # 48 samples in batches of 8: 6 batches an epoch; batch_idx counts batches in all.
    assert trained[5] == ("train_batch", 0, 5, 5) and trained[6] == ("train_batch", 1, 6, 6)
    assert ("evaluate_batch", 0) in calls and ("evaluate_batch", 5) in calls
    # The LR scheduler wrapped STEP_EVERY_EPOCH stepped once after the first epoch (6 batches).
    lrs = [m["lr"] for _, m in trial.steps]
    assert lrs == pytest.approx([0.1, (0.1 + 4 * 0.09) / 5, (2 * 0.09 + 3 * 0.081) / 5])


def test_a_context_trial_restores_exactly_in_test_mode(tmp_path) -> None:
    _, result = run(write_determined_model(tmp_path / "restore"))
    assert result.state == "COMPLETED" and result.trials[0].checkpoints


def test_evaluate_full_dataset_replaces_evaluate_batch(tmp_path) -> None:
    _, result = run(write_determined_model(tmp_path / "full", evaluate=EVALUATE_FULL))
    assert 0.0 <= result.trials[0].validations[-1][1]["validation_error"] <= 1.0


def test_the_early_form_runs_with_the_model_passed_to_train_batch(tmp_path) -> None:
    model = write_determined_model(tmp_path / "early")
    _, result = run(model, CONFIG.replace("model_def:MyTrial", "early:EarlyTrial"))
    assert result.state == "COMPLETED"
    assert set(result.trials[0].validations[-1][1]) == {"validation_error"}


def test_train_batch_without_loss_fails_naming_train_batch(tmp_path) -> None:
    body = 'return {"error": (output.argmax(1) != labels).float().mean()}'
    with pytest.raises(ValueError, match=r"MyTrial\.train_batch .*has no 'loss'"):
        run(write_determined_model(tmp_path / "noloss", train_body=body))


def test_train_batch_returning_a_string_fails_naming_train_batch(tmp_path) -> None:
    with pytest.raises(TypeError, match=r"MyTrial\.train_batch .*must return a dict .*got str"):
        run(write_determined_model(tmp_path / "str", train_body='return "done"'))


def test_evaluate_batch_returning_a_list_fails_naming_evaluate_batch(tmp_path) -> None:
    model = write_determined_model(tmp_path / "evallist", evaluate_return="return [0.5]")
    with pytest.raises(TypeError, match=r"MyTrial\.evaluate_batch .*must return a dict of metrics, got list"):
        run(model)


def test_a_trial_without_evaluate_is_refused_naming_the_method(tmp_path) -> None:
    with pytest.raises(TypeError, match=r"does not implement .*PyTorchTrial method\(s\): evaluate_batch"):
        run(write_determined_model(tmp_path / "noeval", evaluate="pass"))


def test_a_trial_that_wraps_no_model_is_told_to(tmp_path) -> None:
    model = write_determined_model(tmp_path / "nowrap")
    source = (
        (model / "model_def.py").read_text().replace("context.wrap_model(nn.Sequential", "(nn.Sequential")
    )
    (model / "model_def.py").write_text(source.replace("self.head = context.wrap_model(", "self.head = ("))
    with pytest.raises(TypeError, match=r"called no context\.wrap_model\(\)"):
        run(model)


def test_a_trial_missing_data_loaders_is_refused_naming_them(tmp_path) -> None:
    model = write_determined_model(tmp_path / "nodata")
    source = (model / "model_def.py").read_text().replace("def build_validation_data_loader", "def _unused")
    (model / "model_def.py").write_text(source)
    with pytest.raises(Exception, match="build_validation_data_loader"):
        run(model)


def _script(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    model = write_determined_model(tmp_path / "script")
    (model / "const.yaml").write_text(CONFIG)
    (model / "main.py").write_text(body)
    env = {"PYTHONPATH": str(compat_path()), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "main.py"], cwd=model, env=env, capture_output=True, text=True, timeout=300
    )


def test_det_experimental_create_runs_the_seed_documents_call(tmp_path) -> None:
    done = _script(
        tmp_path,
        "import determined as det\n"
        "from model_def import MyTrial\n"
        "result = det.experimental.create(trial_def=MyTrial, config='const.yaml', context_dir='.', "
        "local=True, test=True)\n"
        "print('STATE', result.state)\n",
    )
    assert done.returncode == 0, done.stderr
    assert "STATE COMPLETED" in done.stdout


def test_the_trainer_fits_validates_checkpoints_and_resumes(tmp_path) -> None:
    done = _script(
        tmp_path,
        "import determined as det\n"
        "from determined import pytorch\n"
        "from model_def import MyTrial\n"
        "hparams = {'global_batch_size': 8, 'hidden': 6}\n"
        "with det.pytorch.init(hparams=hparams, exp_conf={'searcher': {'name': 'single'}}) as ctx:\n"
        "    trainer = pytorch.Trainer(MyTrial(ctx), ctx)\n"
        "    first = trainer.fit(max_length=pytorch.Epoch(1), validation_period=pytorch.Batch(3),\n"
        "                        checkpoint_period=pytorch.Batch(3))\n"
        "with det.pytorch.init(hparams=hparams, exp_conf={'searcher': {'name': 'single'}}) as ctx:\n"
        "    again = pytorch.Trainer(MyTrial(ctx), ctx).fit(max_length=pytorch.Batch(6), validation_period="
        "pytorch.Batch(3), latest_checkpoint='checkpoints/batches-3')\n"
        "print('SAME', first[-1] == again[-1], len(first), len(again))\n",
    )
    assert done.returncode == 0, done.stderr
    assert "SAME True 2 1" in done.stdout
    assert (tmp_path / "script/checkpoints/batches-6/metadata.json").is_file()


def test_pedls_determined_never_shadows_an_installed_one(tmp_path) -> None:
    real = tmp_path / "site" / "determined"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("REAL = True\n")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from pedl.harness.compat import ensure_determined_importable\n"
        "print(ensure_determined_importable())\n"
        "import determined; print('REAL', getattr(determined, 'REAL', False))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "site")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "REAL True" in done.stdout and str(real) in done.stdout
    alone = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "empty")], capture_output=True, text=True
    )
    assert alone.returncode == 0, alone.stderr
    assert "REAL False" in alone.stdout and str(compat_path()) in alone.stdout


def test_the_determined_config_form_is_accepted_with_its_trial_class() -> None:
    parsed = parse_experiment_config(CONFIG)
    assert parsed.entrypoint == "model_def:MyTrial"
    assert yaml.safe_load(CONFIG)["hyperparameters"]["global_batch_size"] == 8


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_determined_example_trains_in_test_mode_and_its_search_config_is_valid(tmp_path) -> None:
    model = shutil.copytree(EXAMPLES / "digits_determined_pytorch", tmp_path / "digits_det")
    _, result = run(model, (model / "const.yaml").read_text())
    assert result.state == "COMPLETED"
    assert set(result.trials[0].validations[-1][1]) == {"validation_loss", "validation_error"}
    assert parse_experiment_config(str(model / "adaptive.yaml")).searcher_name == "adaptive_asha"


def test_an_entrypoints_mapping_naming_a_determined_trial_is_refused_as_mixing_generations(tmp_path) -> None:
    model = write_determined_model(tmp_path / "mixed")
    config = CONFIG.replace(
        "entrypoint: model_def:MyTrial",
        "entrypoints:\n  trial_class: model_def:MyTrial\n  data_loaders_function: model_def:dataset",
    )
    with pytest.raises(
        ModelDefinitionError, match="mixes PEDL 0.11's entrypoints mapping with a Determined trial"
    ):
        run(model, config)


def test_determined_tensorboard_writers_write_into_the_runs_tensorboard_dir(tmp_path, monkeypatch) -> None:
    """Determined's docs log extra scalars with `determined.tensorboard.metric_writers.pytorch.
    TorchWriter` and `context.get_tensorboard_writer()` (a torch SummaryWriter); both write event files
    into the run's TensorBoard directory, which the harness uploads (the model passes the static check)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from pedl.model_def.static_check import check_model_definition

    logdir = tmp_path / "tb"
    monkeypatch.setenv("PEDL_TENSORBOARD_DIR", str(logdir))
    model = write_determined_model(tmp_path / "writer", train_body=TRAIN_WRITING)
    source = (model / "model_def.py").read_text()
    (model / "model_def.py").write_text(
        "import os\nfrom determined.tensorboard.metric_writers.pytorch import TorchWriter\n" + source
    )
    check_model_definition(model, "model_def:MyTrial")
    _, result = run(model)
    assert result.state == "COMPLETED"
    accumulator = EventAccumulator(str(logdir))
    accumulator.Reload()
    assert {"context_writer/loss", "torch_writer/batch"} <= set(accumulator.Tags()["scalars"])
    assert 0.0 in [e.value for e in accumulator.Scalars("torch_writer/batch")]
    import determined.tensorboard

    with pytest.raises(TypeError):
        determined.tensorboard.MetricWriter()  # abstract, as Determined's


TRAIN_WRITING = """if not hasattr(self, "tb"):
            self.tb = TorchWriter()
        self.tb.writer.add_scalar("torch_writer/batch", batch_idx, batch_idx)
        loss = nn.functional.cross_entropy(output, labels)
        self.context.get_tensorboard_writer().add_scalar("context_writer/loss", loss.item(), batch_idx)
        assert self.context.get_tensorboard_writer() is self.context.get_tensorboard_writer()
        assert str(self.context.get_tensorboard_path()) == os.environ["PEDL_TENSORBOARD_DIR"]
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        self.context.step_optimizer(self.head_opt)
        self.tb.flush()
        self.context.get_tensorboard_writer().flush()
        return {"loss": loss}"""
