"""Determined's PyTorchTrial API reference, the parts published examples reach beyond the context
calls: `det.TrialContext` as an annotation, custom reducers (`det.pytorch.MetricReducer`,
`context.wrap_reducer` with a function or a MetricReducer, for training and validation),
`evaluation_reducer()` with `det.pytorch.Reducer`, and `det.pytorch.PyTorchCallback`."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from determined_models import CONFIG

from pedl.config import parse_experiment_config
from pedl.experimental import run_local
from pedl.harness.build import load_for_config
from pedl.harness.compat import ensure_determined_importable

ensure_determined_importable()

TRIAL = '''
from typing import Any, Dict

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

import determined as det
from determined.pytorch import DataLoader, MetricReducer, PyTorchCallback, PyTorchTrial


def dataset():
    x = torch.arange(48, dtype=torch.float32).reshape(24, 2) / 48
    return TensorDataset(x, (x[:, 0] > 0.25).long())


class Count(MetricReducer):
    """A reducer written as the reference shows: samples seen, per slot then summed."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.seen = 0

    def update(self, n):
        self.seen += n

    def per_slot_reduce(self):
        return self.seen

    def cross_slot_reduce(self, per_slot):
        return {"samples": sum(per_slot)}


class MyTrial(PyTorchTrial):
    def __init__(self, context: det.TrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(2, 2))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
        self.largest = context.wrap_reducer(lambda values: float(np.max(values)), name="largest_loss",
                                            for_validation=False)
        self.count = context.wrap_reducer(Count(), for_training=False)

    def build_training_data_loader(self) -> DataLoader:
        return DataLoader(dataset(), batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self) -> DataLoader:
        return DataLoader(dataset(), batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        data, labels = batch
        loss = nn.functional.cross_entropy(self.model(data), labels)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        self.largest.update(loss.item())
        return {"loss": loss}

    def evaluate_batch(self, batch) -> Dict[str, Any]:
        data, labels = batch
        self.count.update(len(labels))
        wrong = (self.model(data).argmax(1) != labels).float()
        return {"validation_error": wrong.mean(), "wrong": wrong.sum(), "worst": wrong.max()}

    def evaluation_reducer(self):
        return {"wrong": det.pytorch.Reducer.SUM, "worst": det.pytorch.Reducer.MAX}

{callbacks}
'''

CALLBACKS = """
    def build_callbacks(self):
        class Noted(PyTorchCallback):
            def __init__(self):
                self.validations = 0

            def on_training_start(self):
                EVENTS.append("training start")

            def on_training_epoch_start(self, epoch_idx):
                EVENTS.append(f"epoch {epoch_idx} start")

            def on_training_epoch_end(self, epoch_idx):
                EVENTS.append(f"epoch {epoch_idx} end")

            def on_validation_end(self, metrics):
                self.validations += 1
                EVENTS.append(f"validation {sorted(metrics)[0]}")

            def on_checkpoint_save_start(self, checkpoint):
                checkpoint["x"] = 4
                EVENTS.append("save")

            def on_checkpoint_load_start(self, checkpoint):
                EVENTS.append(f"load x={checkpoint['x']}")

            def on_checkpoint_end(self, checkpoint_dir):
                EVENTS.append("saved")

            def state_dict(self):
                return {"validations": self.validations}

            def load_state_dict(self, state):
                EVENTS.append(f"restored validations={state['validations']}")
                self.validations = state["validations"]

        return {"noted": Noted()}


EVENTS = []
"""


def write(directory: Path, callbacks: str = "") -> Path:
    directory.mkdir(parents=True)
    (directory / "model_def.py").write_text(textwrap.dedent(TRIAL).replace("{callbacks}", callbacks))
    return directory


def test_reducers_and_evaluation_reducer_report_as_the_reference_describes(tmp_path) -> None:
    parsed = parse_experiment_config(CONFIG)
    result = run_local(parsed, load_for_config(write(tmp_path / "reducers"), parsed.raw))
    assert result.state == "COMPLETED"
    trial = result.trials[0]
    for _, metrics in trial.steps:  # a function reducer over a step's updates
        assert set(metrics) == {"loss", "largest_loss"} and metrics["largest_loss"] >= metrics["loss"]
    for _, metrics in trial.validations:
        assert metrics["samples"] == 24  # an unnamed MetricReducer's dict, reset before each pass
        # SUM over the 3 batches of 8: the count of wrong answers; MEAN of the batch means otherwise.
        assert metrics["wrong"] == pytest.approx(metrics["validation_error"] * 24)
        assert metrics["worst"] in (0.0, 1.0)


def test_callbacks_run_where_the_reference_places_them_and_keep_their_state(tmp_path) -> None:
    """Determined's checkpoint_hooks example: a callback adds to the checkpoint on save and finds it
    on load; its state_dict travels with the checkpoint."""
    parsed = parse_experiment_config(CONFIG)
    model_def = load_for_config(write(tmp_path / "callbacks", CALLBACKS), parsed.raw)
    result = run_local(parsed, model_def, verify_restore=True)
    assert result.state == "COMPLETED"
    events = sys.modules[model_def.trial_class.__module__].EVENTS
    assert events[:2] == ["training start", "epoch 0 start"]
    assert "epoch 0 end" in events and events.index("epoch 0 end") < events.index("epoch 1 start")
    assert "validation loss" not in events and any(e.startswith("validation ") for e in events)
    save = events.index("save")
    assert events[save + 1] == "saved"
    load = events.index("load x=4")
    assert events[load + 1].startswith("restored validations=")


def test_a_callback_hook_pedl_does_not_call_is_refused_in_one_line(tmp_path) -> None:
    startup = CALLBACKS.replace(
        "            def on_training_start(self):",
        "            def on_trial_startup(self, first_batch_idx, checkpoint_uuid):\n"
        "                pass\n\n"
        "            def on_training_start(self):",
    )
    parsed = parse_experiment_config(CONFIG)
    model_def = load_for_config(write(tmp_path / "startup", startup), parsed.raw)
    refused = "callback 'noted' overrides on_trial_startup .*which pedl does not call"
    with pytest.raises(TypeError, match=refused):
        run_local(parsed, model_def)


def test_samplers_shard_skip_and_repeat_as_documented() -> None:
    from determined.pytorch import samplers

    base = list(range(10))
    shuffled = list(samplers.ReproducibleShuffleSampler(base, seed=3))
    assert sorted(shuffled) == base and shuffled == list(samplers.ReproducibleShuffleSampler(base, seed=3))
    assert list(samplers.DistributedSampler(base, num_workers=3, rank=1)) == [1, 4, 7]
    assert len(samplers.DistributedSampler(base, num_workers=3, rank=1)) == 3
    assert list(samplers.SkipSampler(base, skip=7)) == [7, 8, 9]
    repeated = iter(samplers.RepeatSampler([0, 1]))
    assert [next(repeated) for _ in range(5)] == [0, 1, 0, 1, 0]
    batches = [[0, 1], [2, 3], [4, 5]]
    assert list(samplers.DistributedBatchSampler(batches, 2, 0)) == [[0, 1], [4, 5]]
    with pytest.raises(ValueError, match="rank 2 is not in 0..1"):
        samplers.DistributedSampler(base, num_workers=2, rank=2)
