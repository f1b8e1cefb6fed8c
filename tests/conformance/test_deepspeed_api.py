"""Determined's DeepSpeed Trial API as its reference describes it, where DeepSpeed itself is not
needed: the names import without DeepSpeed installed, `overwrite_deepspeed_config` merges as the
examples use it, and a DeepSpeedTrial passes `experiment create`'s static check (it is no longer
refused). Training is tests/integration/test_deepspeed.py's, in DeepSpeed's own environment."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "sdk" / "compat"
if str(COMPAT) not in sys.path:
    sys.path.insert(0, str(COMPAT))

from determined.pytorch import deepspeed as det_ds  # noqa: E402

from pedl.model_def.static_check import check_model_definition  # noqa: E402
from support.deepspeed_models import write_model  # noqa: E402


def test_the_api_names_import_without_deepspeed() -> None:
    names = {"DeepSpeedTrial", "DeepSpeedTrialContext", "ModelParallelUnit", "get_ds_config_from_hparams"}
    names |= {"init", "Trainer"}  # 0.38's script API
    assert names | {"overwrite_deepspeed_config", "make_data_parallel_mpu"} <= set(dir(det_ds))
    assert det_ds.DeepSpeedTrial.trial_context_class is det_ds.DeepSpeedTrialContext


def test_overwrite_deepspeed_config_merges_nested_keys_from_a_file_or_a_dict(tmp_path) -> None:
    base = {"train_batch_size": 16, "optimizer": {"type": "Adam", "params": {"lr": 0.001, "eps": 1e-8}}}
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(base))
    overrides = {"optimizer": {"params": {"lr": 0.01}}, "fp16": {"enabled": False}}
    want = {
        "train_batch_size": 16,
        "optimizer": {"type": "Adam", "params": {"lr": 0.01, "eps": 1e-8}},
        "fp16": {"enabled": False},
    }
    assert det_ds.overwrite_deepspeed_config(str(path), overrides) == want
    assert det_ds.overwrite_deepspeed_config(base, overrides) == want
    assert base["optimizer"]["params"]["lr"] == 0.001  # the caller's dict is left alone
    assert det_ds.overwrite_deepspeed_config(base, {}) == base


def test_overwrite_deepspeed_config_refuses_what_is_no_config(tmp_path) -> None:
    with pytest.raises(ValueError, match="cannot read .*missing.json as JSON"):
        det_ds.overwrite_deepspeed_config(str(tmp_path / "missing.json"), {})
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds no JSON object"):
        det_ds.overwrite_deepspeed_config(tmp_path / "list.json", {})
    with pytest.raises(TypeError, match="got int"):
        det_ds.overwrite_deepspeed_config(3, {})  # type: ignore[arg-type]


def test_a_deepspeed_trial_passes_the_static_check_under_determineds_launcher(tmp_path) -> None:
    model = write_model(tmp_path / "ds")
    launched = ["python3", "-m", "determined.launch.deepspeed", "--trial", "model_def:TinyDeepSpeedTrial"]
    check_model_definition(model, launched)
    check_model_definition(model, "model_def:TinyDeepSpeedTrial")


def test_get_ds_config_from_hparams_reads_the_named_file_and_merges_the_overrides(tmp_path) -> None:
    (tmp_path / "ds_config.json").write_text(
        json.dumps({"train_batch_size": 64, "optimizer": {"type": "Adam"}})
    )
    hparams = {"deepspeed_config": "ds_config.json", "overwrite_deepspeed_args": {"train_batch_size": 32}}
    want = {"train_batch_size": 32, "optimizer": {"type": "Adam"}}
    assert det_ds.get_ds_config_from_hparams(hparams, tmp_path) == want
    assert det_ds.get_ds_config_from_hparams({"deepspeed_config": "ds_config.json"}, str(tmp_path)) == {
        "train_batch_size": 64,
        "optimizer": {"type": "Adam"},
    }
    custom = {"ds": "ds_config.json", "extra": {"fp16": {"enabled": True}}}
    got = det_ds.get_ds_config_from_hparams(custom, tmp_path, config_key="ds", overwrite_key="extra")
    assert got["fp16"] == {"enabled": True}


def test_get_ds_config_from_hparams_refuses_what_it_cannot_merge(tmp_path) -> None:
    with pytest.raises(ValueError, match="have no 'deepspeed_config'.*they have lr"):
        det_ds.get_ds_config_from_hparams({"lr": 0.1}, tmp_path)
    (tmp_path / "twice.json").write_text('{"train_batch_size": 8, "train_batch_size": 16}')
    with pytest.raises(ValueError, match=r"duplicate keys \['train_batch_size'\]"):
        det_ds.get_ds_config_from_hparams({"deepspeed_config": "twice.json"}, tmp_path)
    (tmp_path / "ok.json").write_text("{}")
    with pytest.raises(ValueError, match="'overwrite_deepspeed_args' must be a mapping.*got list"):
        det_ds.get_ds_config_from_hparams(
            {"deepspeed_config": "ok.json", "overwrite_deepspeed_args": [1]}, tmp_path
        )


def test_set_mpu_takes_data_parallelism_and_refuses_model_or_pipeline_parallelism() -> None:
    context = det_ds.DeepSpeedTrialContext({}, {})
    plain = det_ds.make_data_parallel_mpu(context.distributed)
    assert plain == det_ds.ModelParallelUnit(
        data_parallel_rank=0,
        data_parallel_world_size=1,
        should_report_metrics=True,
        should_build_data_loader=True,
    )
    assert context.mpu == plain
    context.set_mpu(plain)
    assert context.mpu == plain
    # A pipeline stage that builds no data loader (as gpt_neox's does on its middle stages).
    stage = det_ds.ModelParallelUnit(0, 1, should_report_metrics=False, should_build_data_loader=False)
    with pytest.raises(RuntimeError, match="does not support DeepSpeed model or pipeline parallelism"):
        context.set_mpu(stage)
    with pytest.raises(TypeError, match="takes a determined.pytorch.deepspeed.ModelParallelUnit, got dict"):
        context.set_mpu({"data_parallel_rank": 0})


def test_det_ds_init_and_trainer_refuse_what_they_cannot_run_in_one_line() -> None:
    """0.38's script API: init()'s unknown arguments and a trial without an engine, named."""
    with pytest.raises(TypeError, match=r"det_ds.init\(\): pedl does not support the argument\(s\) bogus"):
        with det_ds.init(hparams={}, bogus=1):
            pass
    # Determined's default is what pedl does (TensorBoard files uploaded); turning it off is refused.
    with pytest.raises(TypeError, match="enable_tensorboard_logging=False is not supported"):
        with det_ds.init(hparams={}, enable_tensorboard_logging=False):
            pass

    class NoEngine(det_ds.DeepSpeedTrial):
        def __init__(self, context: det_ds.DeepSpeedTrialContext) -> None:
            self.context = context

        def build_training_data_loader(self) -> list:
            return []

        def build_validation_data_loader(self) -> list:
            return []

        def train_batch(self, dataloader_iter, epoch_idx, batch_idx):  # type: ignore[no-untyped-def]
            return {"loss": 0.0}

        def evaluate_batch(self, dataloader_iter, batch_idx):  # type: ignore[no-untyped-def]
            return {"loss": 0.0}

    context = det_ds.DeepSpeedTrialContext({}, {})
    with pytest.raises(TypeError, match=r"called no context.wrap_model_engine\(\)"):
        det_ds.Trainer(NoEngine(context), context)
