"""A Keras script's fit call run as a trial: data forms, steps, validation, checkpoints, exact resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from simple_scripts import FITS, script_config, write_script

from pedl.harness.build import start_trial
from pedl.harness.controller import TrialController
from pedl.simple._controller import ScriptTrialController

HPARAMS = {"lr": 0.05}


def start(directory: Path, seed: int = 3, checkpoint: Path | None = None, **config: Any) -> TrialController:
    return start_trial(directory, script_config(**config), HPARAMS, seed, checkpoint)


@pytest.mark.parametrize("kind", list(FITS))
def test_each_data_form_trains_in_steps_and_validates(tmp_path: Path, kind: str) -> None:
    ctl = start(write_script(tmp_path / "model", FITS[kind]))
    assert isinstance(ctl, ScriptTrialController)
    first = ctl.train_until(5)
    assert first.num_batches == 5 and set(first.metrics) == {"loss", "accuracy"}
    later = ctl.train_until(60)  # many epochs: the data cycles
    assert ctl.batches_trained == 60 and later.metrics["loss"] < first.metrics["loss"]
    assert {"val_loss", "val_accuracy"} <= set(ctl.validate())


def run_steps(ctl: TrialController, steps: range) -> list[dict[str, Any]]:
    out = []
    for step in steps:
        out.append(ctl.train_until(step * 5).metrics)
        out.append(ctl.validate())
    return out


@pytest.mark.parametrize("kind", ["arrays", "dataset", "pydataset"])
def test_a_restored_trial_continues_exactly(tmp_path: Path, kind: str) -> None:
    model = write_script(tmp_path / "model", FITS[kind])
    uninterrupted = run_steps(start(model), range(1, 6))

    first = start(model)
    interrupted = run_steps(first, range(1, 4))
    first.save(tmp_path / "ckpt")
    first.train_until(25)  # training on after the save must not leak into the checkpoint

    resumed = start(model, checkpoint=tmp_path / "ckpt")
    assert resumed.batches_trained == 15
    assert interrupted + run_steps(resumed, range(4, 6)) == uninterrupted


def test_the_checkpoint_names_the_script_and_holds_keras_weights(tmp_path: Path) -> None:
    ctl = start(write_script(tmp_path / "model", FITS["arrays"]), args=["--x", "1"])
    ctl.train_until(3)
    ctl.save(tmp_path / "ckpt")
    metadata = json.loads((tmp_path / "ckpt" / "metadata.json").read_text())
    assert metadata["entrypoint"] == {"script": "train.py", "args": ["--x", "1"]}
    assert metadata["framework"] == "keras" and metadata["batches_trained"] == 3
    assert (tmp_path / "ckpt" / "model.weights.h5").is_file()


def test_the_script_sees_its_args_and_directory_and_fit_does_not_return(tmp_path: Path) -> None:
    body = (
        "json.dump({'argv': sys.argv, 'cwd': os.getcwd()}, open('seen.json', 'w'))\n"
        "try:\n"
        f"    {FITS['arrays']}\n"
        "except Exception:\n"
        "    raise SystemExit('fit raised an Exception')\n"
        "open('after_fit', 'w').close()\n"
    )
    model = write_script(tmp_path / "model", body, name="run.py")
    start(model, script="run.py", args=["--units", "8"])
    seen = json.loads((model / "seen.json").read_text())
    assert seen["argv"] == [str(model / "run.py"), "--units", "8"]
    assert Path(seen["cwd"]) == model
    assert not (model / "after_fit").exists()
