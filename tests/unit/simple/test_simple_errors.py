"""What a user sees when a Simple Model Definition cannot work: each error names what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from simple_scripts import script_config, write_script

from pedl.harness.build import start_trial
from pedl.model_def import ModelDefinitionError
from pedl.model_def.static_check import check_model_definition


def start(directory: Path, script: str = "train.py") -> None:
    start_trial(directory, script_config(script), {"lr": 0.05}, seed=0)


def test_a_script_that_never_calls_fit_is_named(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model", "model.evaluate(x, y)", name="nofit.py")
    with pytest.raises(ModelDefinitionError, match=r"nofit\.py finished without calling model\.fit\(\)"):
        start(model, "nofit.py")


def test_an_unknown_hyperparameter_lists_the_known_ones(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model", "pedl.get_hyperparameter('units')")
    with pytest.raises(ModelDefinitionError) as info:
        start(model)
    message = str(info.value)
    assert "train.py:" in message and "unknown hyperparameter 'units'" in message and "lr" in message


def test_a_missing_script_lists_the_files_there(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model", "pass")
    with pytest.raises(ModelDefinitionError, match=r"'tarin\.py' not found .*train\.py"):
        start(model, "tarin.py")


@pytest.mark.parametrize(
    ("fit", "expected"),
    [
        ("model.fit(x, y)", "no validation data"),
        ("model.fit((v for v in [(x, y)]), validation_data=(x, y))", "Python generator"),
        ("model.fit(x, y, validation_split=0.2, class_weight={0: 1.0, 1: 2.0})", "class_weight"),
        ("model.fit(x, y, batch_size=0, validation_split=0.2)", "batch_size must be a positive int"),
        ("keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]).fit(x, y)", "not compiled"),
    ],
)
def test_unusable_fit_arguments_are_refused(tmp_path: Path, fit: str, expected: str) -> None:
    model = write_script(tmp_path / "model", fit)
    with pytest.raises((TypeError, ValueError), match=expected) as info:
        start(model)
    assert "train.py:" in str(info.value)


def test_a_script_exiting_early_reports_its_status(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model", "sys.exit(3)")
    with pytest.raises(ModelDefinitionError, match="exited with status 3 before calling model.fit"):
        start(model)


def test_static_check_wants_the_script_and_no_trial_class(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model", "model.fit(x, y, validation_split=0.2)")
    check_model_definition(model, {"script": "train.py", "args": ["--a"]})
    check_model_definition(model, "train.py", ["train.py"])
    with pytest.raises(ModelDefinitionError, match=r"'other\.py' is not in the model definition"):
        check_model_definition(model, {"script": "other.py"})
    with pytest.raises(ModelDefinitionError, match=r"left out by \.pedlignore"):
        check_model_definition(model, {"script": "train.py"}, ["README.md"])
    (model / "broken.py").write_text("def f(:\n")
    with pytest.raises(ModelDefinitionError, match="broken.py, line 1: syntax error"):
        check_model_definition(model, {"script": "train.py"})
