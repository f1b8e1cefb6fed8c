"""`experiment create` validates locally before it connects, and submits what it validated."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.cli.main import main
from pedl.v1 import common_pb2, scheduler_pb2

from .fake_scheduler import Script, serve, step, trial

GOOD = "description: test\nsearcher:\n  name: single\n  metric: error\n  max_steps: 2\n"
BAD = "description: test\nsearcher:\n  name: single\n  max_steps: bad_field\n  metric: error\n"


@pytest.fixture
def context_dir(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "__init__.py").write_text(
        "from pedl.pytorch import PyTorchTrial\n\nclass T(PyTorchTrial):\n    pass\n"
    )
    return d


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "const.yaml"
    path.write_text(text)
    return path


def test_config_error_exits_2_before_connecting(
    tmp_path: Path, context_dir: Path, unused_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, BAD)
    code = main(["--master", unused_address, "experiment", "create", str(config), str(context_dir)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().startswith(f"error: {config}, line 4: searcher.max_steps: expected an integer")


def test_real_config_error_names_the_field(
    tmp_path: Path, context_dir: Path, unused_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, "searcher:\n  name: single\n  metric: loss\n  max_steps: -3\n")
    code = main(["--master", unused_address, "experiment", "create", str(config), str(context_dir)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {config}") and "max_steps" in err
    assert "cannot reach" not in err


def test_missing_config_file(tmp_path: Path, context_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "create", str(tmp_path / "nope.yaml"), str(context_dir)]) == 2
    assert capsys.readouterr().err.strip() == f"error: config file {tmp_path / 'nope.yaml'} does not exist"


def test_missing_context_dir(tmp_path: Path, unused_address: str, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, GOOD)
    missing = tmp_path / "missing"
    assert main(["-m", unused_address, "experiment", "create", str(config), str(missing)]) == 2
    assert capsys.readouterr().err.strip() == f"error: context directory {missing} does not exist"


def test_context_error_is_reported(
    tmp_path: Path, context_dir: Path, unused_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    config = _config(tmp_path, GOOD)
    assert main(["-m", unused_address, "experiment", "create", str(config), str(empty)]) == 2
    assert "empty" in capsys.readouterr().err


def test_a_context_without_a_trial_is_refused_before_connecting(
    tmp_path: Path, unused_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "__init__.py").write_text("def make_data_loaders(config, hparams):\n    return [], []\n")
    config = _config(tmp_path, GOOD)
    assert main(["-m", unused_address, "experiment", "create", str(config), str(model)]) == 2
    assert "no Trial subclass found" in capsys.readouterr().err


def test_a_syntax_error_is_reported_with_file_and_line(
    tmp_path: Path, unused_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "__init__.py").write_text("from .trial import T\n")
    (model / "trial.py").write_text("import torch\n\nclass T(PyTorchTrial)\n    pass\n")
    config = _config(tmp_path, GOOD)
    assert main(["-m", unused_address, "experiment", "create", str(config), str(model)]) == 2
    assert "trial.py, line 3: syntax error" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("entrypoint", "said"),
    [
        (":NoSuchTrial", "entrypoint ':NoSuchTrial': __init__.py defines no 'NoSuchTrial' (its classes: T)"),
        (":make_data_loaders", "entrypoint ':make_data_loaders': 'make_data_loaders' in __init__.py, line 6, "
         "is a function, not a Trial class"),
    ],
)  # fmt: skip
def test_an_entrypoint_naming_no_class_is_refused_in_one_line_before_connecting(
    tmp_path: Path, context_dir: Path, unused_address: str, capsys, entrypoint: str, said: str
) -> None:
    """Before: accepted, then every trial run failed the same way on the agent (#37.5)."""
    init = context_dir / "__init__.py"
    init.write_text(init.read_text() + "\ndef make_data_loaders(config, hparams):\n    return [], []\n")
    config = _config(tmp_path, GOOD + f"entrypoint: '{entrypoint}'\n")
    assert main(["-m", unused_address, "experiment", "create", str(config), str(context_dir)]) == 2
    assert capsys.readouterr().err == f"error: context directory {context_dir}: {said}\n"


def test_unreachable_master(
    tmp_path: Path, context_dir: Path, unused_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, GOOD)
    assert main(["-m", unused_address, "experiment", "create", str(config), str(context_dir)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"error: cannot reach the pedl scheduler at {unused_address} (is the cluster up? `pedl cluster up`)"
    )


def test_create_sends_config_text_and_packed_context(
    tmp_path: Path, context_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = Script()
    with serve(script) as address:
        code = main(["-m", address, "experiment", "create", str(_config(tmp_path, GOOD)), str(context_dir)])
    assert code == 0
    assert capsys.readouterr().out == "Created experiment 7\n"
    (request,) = script.created
    assert request.config_yaml == GOOD
    assert request.model_definition_name == "model"
    assert request.model_definition[:2] == b"\x1f\x8b"


@pytest.mark.parametrize(
    ("final", "code"), [(common_pb2.EXPERIMENT_STATE_COMPLETED, 0), (common_pb2.EXPERIMENT_STATE_ERROR, 1)]
)
def test_create_follow_prints_progress_until_the_end(
    tmp_path: Path, context_dir: Path, capsys: pytest.CaptureFixture[str], final: int, code: int
) -> None:
    done = common_pb2.TRIAL_STATE_COMPLETED if code == 0 else common_pb2.TRIAL_STATE_ERROR
    error = "" if code == 0 else "ValueError: boom"
    script = Script(
        experiments=[
            scheduler_pb2.GetExperimentResponse(
                experiment=scheduler_pb2.Experiment(id=7, state=1), trials=[trial(3)]
            ),
            scheduler_pb2.GetExperimentResponse(
                experiment=scheduler_pb2.Experiment(id=7, state=final),
                trials=[trial(3, state=done, error=error)],
            ),
        ],
        trials={
            3: [
                scheduler_pb2.GetTrialResponse(trial=trial(3), steps=[step(1, 100, 0.5)]),
                scheduler_pb2.GetTrialResponse(
                    trial=trial(3, state=done, total_batches=200, error=error),
                    steps=[step(1, 100, 0.5), step(2, 200, 0.25)],
                ),
            ]
        },
    )
    with serve(script) as address:
        argv = [
            "-m",
            address,
            "experiment",
            "create",
            str(_config(tmp_path, GOOD)),
            str(context_dir),
            "--follow",
        ]
        assert main(argv) == code
    lines = capsys.readouterr().out.splitlines()
    state = "COMPLETED" if code == 0 else "ERROR"
    assert lines[:5] == [
        "Created experiment 7",
        "Trial 3 ACTIVE: layers=2, lr=0.1",
        "Trial 3 step 1: batches 100 (+100) loss=0.5",
        "Trial 3 step 2: batches 200 (+100) loss=0.25",
        f"Trial 3 ACTIVE -> {state} after 200 batches",
    ]
    # The closing best-trial line: this search reported no validation metric.
    assert lines[5] == "No trial of experiment 7 has reported a validation metric"
    assert lines[6] == f"Experiment 7 {state}"
    assert lines[7:] == ([] if code == 0 else ["Trial 3 error: ValueError: boom"])
