"""PyTorch trials training on a CUDA GPU through the real harness (local and test mode), with mixed
precision, and their checkpoints moving between GPU and CPU-only processes. Skipped without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gpu_models import DETERMINED_AMP_TRIAL, DETERMINED_TRIAL, SEED_TRIAL, config, write_model  # noqa: E402

import pedl.experimental  # noqa: E402
from pedl.model_def import load_model_definition  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

AMP = "optimizations:\n  mixed_precision: O1\n"

# Run in a process that sees no GPU: load the GPU-saved checkpoint for inference, then resume its
# training on the CPU and save a checkpoint of that.
CPU_RESUME = """
import json, sys
from pathlib import Path
import torch
from pedl.model_def import load_model_definition
from pedl.pytorch import PyTorchTrialController, load_trial_from_checkpoint_path
from pedl.pytorch._optimizations import TorchOptimizations

model_dir, checkpoint, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
assert not torch.cuda.is_available()
trial = load_trial_from_checkpoint_path(checkpoint, model_definition_dir=model_dir)
devices = sorted({str(p.device) for p in trial.model.parameters()})
prediction = trial.model(torch.zeros(1, 16)).tolist()
model_def = load_model_definition(model_dir)
loaders = model_def.make_data_loaders({}, {})
controller = PyTorchTrialController.from_trial_class(model_def.trial_class, {}, loaders)
controller.configure_optimizations(TorchOptimizations(mixed_precision=True))
controller.load(checkpoint)
resumed_at = controller.batches_trained
result = controller.train_until(resumed_at + 10)
controller.save(out)
print(json.dumps({"devices": devices, "prediction": prediction, "resumed_at": resumed_at,
                  "trained": controller.batches_trained, "controller_device": str(controller.device)}))
"""


def steps_metrics(result) -> list[dict]:
    (trial,) = result.trials
    return [metrics for _, metrics in trial.steps]


def latest_checkpoint(result) -> Path:
    (trial,) = result.trials
    return result.checkpoint_dir / f"trial-1/{trial.checkpoints[-1]}"


def test_a_seed_trial_trains_on_cuda_in_mixed_precision_and_test_mode_restores_it(tmp_path) -> None:
    model_dir = write_model(tmp_path / "seed", SEED_TRIAL)
    trial_class = load_model_definition(model_dir).trial_class
    result = pedl.experimental.create(trial_class, model_dir, config=config(extra=AMP), local=True, test=True)
    assert result.state == "COMPLETED"
    assert all(m["on_cuda"] == 1.0 and m["half"] == 1.0 for m in steps_metrics(result)), steps_metrics(result)


def test_a_determined_trial_trains_on_cuda_through_its_context(tmp_path) -> None:
    from pedl.harness.compat import ensure_determined_importable

    ensure_determined_importable()
    model_dir = write_model(tmp_path / "det", DETERMINED_TRIAL)
    trial_class = load_model_definition(model_dir).trial_class
    result = pedl.experimental.create(
        trial_class, model_dir, config=config(metric="validation_error"), local=True, test=True
    )
    assert result.state == "COMPLETED"
    for metrics in steps_metrics(result):
        assert metrics["batch_on_cuda"] == metrics["model_on_cuda"] == metrics["to_device_on_cuda"] == 1.0


def test_a_determined_trial_trains_in_mixed_precision_with_a_wrapped_scaler(tmp_path) -> None:
    from pedl.harness.compat import ensure_determined_importable

    ensure_determined_importable()
    model_dir = write_model(tmp_path / "det_amp", DETERMINED_AMP_TRIAL)
    trial_class = load_model_definition(model_dir).trial_class
    result = pedl.experimental.create(
        trial_class, model_dir, config=config(metric="validation_error"), local=True, test=True
    )
    assert result.state == "COMPLETED"
    assert all(m["half"] == 1.0 and m["model_on_cuda"] == 1.0 for m in steps_metrics(result))


def test_a_gpu_checkpoint_resumes_on_a_cpu_only_process_and_back_on_the_gpu(tmp_path) -> None:
    from pedl.pytorch import PyTorchTrialController
    from pedl.pytorch._optimizations import TorchOptimizations

    model_dir = write_model(tmp_path / "seed", SEED_TRIAL)
    model_def = load_model_definition(model_dir)
    result = pedl.experimental.create(
        model_def.trial_class, model_dir, config=config(batches=20, extra=AMP), local=True
    )
    assert result.state == "COMPLETED"
    gpu_checkpoint = latest_checkpoint(result)

    cpu_checkpoint = tmp_path / "cpu-checkpoint"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    argv = [sys.executable, "-c", CPU_RESUME, str(model_dir), str(gpu_checkpoint), str(cpu_checkpoint)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    on_cpu = json.loads(done.stdout.strip().splitlines()[-1])
    assert on_cpu["devices"] == ["cpu"] and on_cpu["controller_device"] == "cpu"
    assert on_cpu["resumed_at"] == 20 and on_cpu["trained"] == 30

    for checkpoint, batches in ((gpu_checkpoint, 20), (cpu_checkpoint, 30)):
        controller = PyTorchTrialController.from_trial_class(
            model_def.trial_class, {}, model_def.make_data_loaders({}, {})
        )
        controller.configure_optimizations(TorchOptimizations(mixed_precision=True))
        assert controller.device.type == "cuda"
        controller.load(checkpoint)
        assert controller.batches_trained == batches
        controller.train_until(batches + 10)
        assert all(p.is_cuda for p in controller.model.parameters())
        assert controller.validate()["val_on_cuda"] == 1.0
