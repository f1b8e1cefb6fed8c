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
    assert {"DeepSpeedTrial", "DeepSpeedTrialContext", "overwrite_deepspeed_config"} <= set(dir(det_ds))
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
