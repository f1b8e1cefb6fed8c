"""Python generators in a Simple Model Definition: fit(generator), Keras 2's fit_generator, and
exact resume by replay (with the fingerprint check that catches a generator that is not
deterministic under the trial seed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from simple_scripts import script_config, write_script

from pedl.harness.build import start_trial
from pedl.harness.controller import TrialController
from pedl.model_def import ModelDefinitionError

HPARAMS = {"lr": 0.05}

BATCHES = """
def batches(x, y, size):
    while True:
        order = np.random.permutation(len(x))
        for i in range(0, len(x) - size + 1, size):
            rows = order[i : i + size]
            yield x[rows], y[rows]
"""

CASES = {
    # The script: an endless generator reshuffling with np.random every epoch.
    "fit": BATCHES + "model.fit(batches(x[:44], y[:44], 4), steps_per_epoch=7, epochs=10, "
    "validation_data=(x[44:], y[44:]))",
    # Keras 2: fit_generator with a validation generator drawn on from pass to pass.
    "fit_generator": BATCHES + "model.fit_generator(batches(x[:44], y[:44], 4), steps_per_epoch=7, "
    "epochs=10, validation_data=batches(x[44:], y[44:], 4), validation_steps=3, workers=1)",
    "iterator": "model.fit(iter([(x[i % 60 : i % 60 + 4], y[i % 60 : i % 60 + 4]) for i in range(400)]), "
    "steps_per_epoch=5, validation_data=(x, y))",
}


def start(model: Path, checkpoint: Path | None = None, **reproducibility: Any) -> TrialController:
    config = script_config()
    if reproducibility:
        config["reproducibility"] = reproducibility
    return start_trial(model, config, HPARAMS, 7, checkpoint)


def run_steps(ctl: TrialController, steps: range) -> list[dict[str, Any]]:
    out = []
    for step in steps:
        out.append(ctl.train_until(step * 5).metrics)
        out.append(ctl.validate())
    return out


@pytest.mark.parametrize("kind", list(CASES))
def test_a_generator_trial_resumes_exactly(tmp_path: Path, kind: str) -> None:
    model = write_script(tmp_path / "model", CASES[kind])
    uninterrupted = start(model)
    expected = []
    for step in range(1, 6):
        expected += run_steps(uninterrupted, range(step, step + 1))
        if step == 3:
            uninterrupted.save(tmp_path / "unused")  # checkpoints happen in both runs alike

    first = start(model)
    interrupted = run_steps(first, range(1, 4))
    first.save(tmp_path / "ckpt")
    first.train_until(25)

    resumed = start(model, checkpoint=tmp_path / "ckpt")
    assert resumed.batches_trained == 15
    assert interrupted + run_steps(resumed, range(4, 6)) == expected


NOT_DETERMINISTIC = """
import time
def noisy():
    while True:
        rows = np.random.default_rng(time.perf_counter_ns()).permutation(60)[:4]
        yield x[rows], y[rows]
model.fit(noisy(), steps_per_epoch=5, validation_data=(x, y))
"""


def test_a_generator_not_deterministic_under_the_seed_is_reported_by_name(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model", NOT_DETERMINISTIC)
    first = start(model)
    first.train_until(5)
    first.save(tmp_path / "ckpt")
    with pytest.raises(RuntimeError, match=r"generator noisy \(train.py:\d+\).*not deterministic") as info:
        start(model, checkpoint=tmp_path / "ckpt")
    assert "reproducibility.replay_mismatch: warn" in str(info.value)
    resumed = start(model, checkpoint=tmp_path / "ckpt", replay_mismatch="warn")
    assert resumed.train_until(10).num_batches == 5


@pytest.mark.parametrize(
    ("fit", "message"),
    [
        (BATCHES + "model.fit(batches(x, y, 4), validation_data=(x, y))", r"py:\d+.*no steps_per_epoch"),
        (
            BATCHES + "model.fit(batches(x, y, 4), steps_per_epoch=3, validation_data=batches(x, y, 4))",
            r"train.py:\d+.*generator as validation_data but no validation_steps",
        ),
        (BATCHES + "model.fit_generator(batches(x, y, 4), validation_data=(x, y))", r"no steps_per_epoch"),
    ],
)
def test_a_generator_without_its_step_count_is_refused_with_the_fit_line(
    tmp_path: Path, fit: str, message: str
) -> None:
    with pytest.raises((ValueError, ModelDefinitionError), match=message):
        start(write_script(tmp_path / "model", fit))


def test_a_generator_that_runs_out_says_it_must_be_endless(tmp_path: Path) -> None:
    fit = "model.fit((b for b in [(x[:4], y[:4])] * 3), steps_per_epoch=3, validation_data=(x, y))"
    ctl = start(write_script(tmp_path / "model", fit))
    with pytest.raises(RuntimeError, match=r"ran out after 3 batches.*must be endless"):
        ctl.train_until(5)
