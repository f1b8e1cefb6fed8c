"""A small DeepSpeedTrial written from Determined's DeepSpeed API reference, and its experiment
config written as Determined's docs write one (`determined.launch.deepspeed --trial`)."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

from support.processes import free_port

_REPO = Path(__file__).resolve().parents[2]

MODEL_DEF = """
import deepspeed
import torch

from determined.pytorch import DataLoader
from determined.pytorch.deepspeed import DeepSpeedTrial, DeepSpeedTrialContext


def dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = (x[:, 0] > 0).long()
    return torch.utils.data.TensorDataset(x, y)


class TinyDeepSpeedTrial(DeepSpeedTrial):
    def __init__(self, context: DeepSpeedTrialContext) -> None:
        self.context = context
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        config = {
            "train_micro_batch_size_per_gpu": 4,
            "gradient_accumulation_steps": 2,
            "optimizer": {"type": "SGD", "params": {"lr": context.get_hparam("lr")}},
            "zero_optimization": {"stage": context.get_hparam("zero_stage")},
            "zero_allow_untested_optimizer": True,
        }
        # "fp16" or "bf16" (the GPU tests'): DeepSpeed keeps the model's parameters in that type.
        precision = context.get_hparams().get("precision", "fp32")
        if precision != "fp32":
            config[precision] = {"enabled": True}
        engine, _, _, _ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), config=config
        )
        self.engine = context.wrap_model_engine(engine)
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def build_training_data_loader(self):
        size = self.context.train_micro_batch_size_per_gpu
        return DataLoader(dataset(128, 0), batch_size=size, shuffle=True)

    def build_validation_data_loader(self):
        return DataLoader(dataset(32, 1), batch_size=self.context.train_micro_batch_size_per_gpu)

    def _inputs(self, x):
        if self.engine.fp16_enabled():
            return x.half()
        return x.bfloat16() if self.engine.bfloat16_enabled() else x

    def train_batch(self, dataloader_iter, epoch_idx, batch_idx):
        x, y = self.context.to_device(next(dataloader_iter))
        loss = self.loss_fn(self.engine(self._inputs(x)).float(), y)
        self.engine.backward(loss)
        self.engine.step()
        return {"loss": loss}

    def evaluate_batch(self, dataloader_iter, batch_idx):
        x, y = self.context.to_device(next(dataloader_iter))
        out = self.engine(self._inputs(x)).float()
        return {"validation_loss": self.loss_fn(out, y), "accuracy": (out.argmax(1) == y).float().mean()}
"""

CONFIG = """
name: tiny-deepspeed
hyperparameters:
  lr: 0.1
  zero_stage: {zero_stage}
searcher:
  name: single
  metric: validation_loss
  smaller_is_better: true
  max_length:
    batches: {batches}
{source}scheduling_unit: 4
min_validation_period:
  batches: 4
resources:
  slots_per_trial: 2
max_restarts: 0
entrypoint:
  - python3
  - -m
  - determined.launch.deepspeed
  - --trial
  - model_def:TinyDeepSpeedTrial
"""


# Determined 0.38's form (its DCGAN example's): a script that builds the trial itself with
# det_ds.init() and trains it with det_ds.Trainer, under `determined.launch.deepspeed python3 SCRIPT`.
TRAINER_SCRIPT = """
import determined as det
from determined import pytorch
from determined.pytorch import deepspeed as det_ds

import model_def

info = det.get_cluster_info()
if info is not None:  # as the DCGAN example reads them (its data section under the private name)
    hparams, data, latest = info.trial.hparams, info.trial._config["data"], info.latest_checkpoint
else:
    hparams, data, latest = {"lr": 0.1, "zero_stage": 1}, {"batches": 12}, None
with det_ds.init(hparams=hparams) as context:
    trial = model_def.TinyDeepSpeedTrial(context)
    trainer = det_ds.Trainer(trial, context)
    trainer.fit(
        max_length=pytorch.Batch(data["batches"]),
        validation_period=pytorch.Batch(4),
        checkpoint_period=pytorch.Batch(8),
        latest_checkpoint=latest,
    )
"""

SCRIPT_CONFIG = """
name: tiny-deepspeed-trainer
data:
  batches: 12
hyperparameters:
  lr: 0.1
  zero_stage: 1
searcher:
  name: single
  metric: validation_loss
  smaller_is_better: true
  max_length:
    batches: 12
checkpoint_storage:
  save_trial_latest: 10  # every checkpoint fit() takes stays listed
resources:
  slots_per_trial: 2
max_restarts: 0
entrypoint:
  - python3
  - -m
  - determined.launch.deepspeed
  - python3
  - trainer.py
"""


def write_model(directory: Path) -> Path:
    """The DeepSpeedTrial (model_def.py) and the script that trains it with det_ds.Trainer (trainer.py)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model_def.py").write_text(MODEL_DEF)
    (directory / "trainer.py").write_text(TRAINER_SCRIPT)
    return directory


def config(batches: int = 8, zero_stage: int = 1, source_checkpoint: str = "") -> str:
    """The experiment's config; `source_checkpoint`: a checkpoint UUID the trial warm-starts from."""
    source = f"  source_checkpoint_uuid: {source_checkpoint}\n" if source_checkpoint else ""
    return textwrap.dedent(CONFIG).format(batches=batches, zero_stage=zero_stage, source=source)


@functools.cache
def deepspeed_python() -> tuple[str | None, str]:
    """(the DeepSpeed environment's interpreter, "") once `scripts/install-deepspeed-env` has built
    it (it builds it, from the package index, when absent), else (None, why not)."""
    done = subprocess.run(
        [str(_REPO / "scripts" / "install-deepspeed-env")], capture_output=True, text=True, cwd=_REPO
    )
    if done.returncode != 0:
        return None, f"scripts/install-deepspeed-env failed: {done.stderr.strip()[-500:]}"
    return done.stdout.strip().splitlines()[-1], ""


# Run on each rank by torch.distributed.run, as pedl's harness builds a trial, once per ZeRO stage
# named in argv[3] ("1,2,3"; DeepSpeed is imported once): 3 batches, a checkpoint, 2 more; then a
# fresh controller loads the checkpoint and trains the same 2 batches. Each stage's files go to
# <out>/stage<N>/rank<R>, its losses to <out>/stage<N>/result<R>.json.
RESUME_DRIVER = """
import json, os, sys
import torch.distributed as dist
dist.init_process_group("gloo")
from pedl.harness.compat import ensure_determined_importable
ensure_determined_importable()
from pedl import _trial_context
_trial_context.set_experiment_config({})
sys.path.insert(0, sys.argv[1])
import model_def
rank = dist.get_rank()
for stage in (int(s) for s in sys.argv[3].split(",")):
    out = os.path.join(sys.argv[2], f"stage{stage}")
    hparams = {"lr": 0.1, "zero_stage": stage}
    first = model_def.TinyDeepSpeedTrial.create_controller(hparams, None, "test")
    first.train_until(3)
    mine = os.path.join(out, f"rank{rank}")
    os.makedirs(mine)
    first.save(mine)
    uninterrupted = first.train_until(5).metrics["loss"]
    dist.barrier()
    second = model_def.TinyDeepSpeedTrial.create_controller(hparams, None, "test")
    second.load(os.path.join(out, "rank0"))  # the chief's directory is the checkpoint pedl stores
    resumed_at = second.batches_trained
    resumed = second.train_until(5).metrics["loss"]
    with open(os.path.join(out, f"result{rank}.json"), "w") as f:
        json.dump({"uninterrupted": uninterrupted, "resumed": resumed, "resumed_at": resumed_at}, f)
    dist.barrier()
"""


def launch_ranks(
    python: str, script: Path, args: Sequence[str], ranks: int, env: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """Runs `script args` on `ranks` processes under torch.distributed.run (in its own session, so
    that the launcher and every rank are ended together even on failure); (exit code, output)."""
    command = [python, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks)]
    process = subprocess.Popen(
        [*command, "--master-port", str(free_port()), str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=None if env is None else dict(env),
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=540)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return process.returncode, output
