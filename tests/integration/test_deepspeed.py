"""Determined's DeepSpeedTrial on 2 slots of a real cluster, DeepSpeed's CPU accelerator over gloo:
trains, validates and checkpoints with ZeRO stage 1; and ZeRO stages 1, 2 and 3 each checkpoint
every rank's partitions (stage 3 its parameters' too) and resume exactly on 2 gloo ranks; and
Determined 0.38's script form (det_ds.init() and det_ds.Trainer) trains on the same 2 slots; and
the context's epoch, initial-batch, profiler and pipeline accessors answer as Determined's reference says."""

from __future__ import annotations

import json
import os

import pytest
from test_cluster import logs, stub, submit, wait

from pedl._metrics import from_struct
from pedl.harness.tensorboard_sync import TENSORBOARD_ENV
from pedl.v1 import common_pb2, scheduler_pb2
from support.deepspeed_models import (
    RESUME_DRIVER,
    SCRIPT_CONFIG,
    config,
    deepspeed_python,
    launch_ranks,
    write_model,
)
from support.processes import local_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def python() -> str:
    found, why = deepspeed_python()
    if found is None:
        pytest.skip(f"no DeepSpeed environment: {why}")
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, python):
    with local_cluster(
        tmp_path_factory.mktemp("cluster"), agents=1, slots=2, agent_args=["--python", python]
    ) as c:
        try:
            yield c
        except BaseException:
            print(c.logs())
            raise


def _train(cluster, model, text: str = "", **options) -> scheduler_pb2.GetTrialResponse:
    exp_id = submit(cluster, model, text or config(**options))
    result = wait(cluster, exp_id, timeout=540)
    (trial,) = result.trials
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, logs(cluster, trial.id)
    return stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))


# Each harness imports DeepSpeed (half a minute on a loaded 2-core machine) before its first step.
@pytest.mark.timeout(600)
def test_a_deepspeed_trial_trains_two_slots_with_zero_and_checkpoints(cluster, tmp_path) -> None:
    detail = _train(cluster, write_model(tmp_path / "ds"), batches=8, zero_stage=1)
    assert [s.total_batches for s in detail.steps] == [4, 8]
    assert all("loss" in from_struct(s.metrics) for s in detail.steps)
    assert [v.total_batches for v in detail.validations] == [4, 8]
    assert {"validation_loss", "accuracy"} <= set(from_struct(detail.validations[-1].metrics))
    text = logs(cluster, detail.trial.id)
    assert "[rank 0] " in text and "[rank 1] " in text
    assert detail.checkpoints and detail.checkpoints[-1].total_batches == 8


# Determined 0.38's form: a script builds the trial with det_ds.init() and trains it with det_ds.Trainer
# under `determined.launch.deepspeed python3 trainer.py`, one process per slot.
@pytest.mark.timeout(600)
def test_a_det_ds_trainer_script_trains_two_slots_and_reports_through_the_core_api(cluster, tmp_path) -> None:
    detail = _train(cluster, write_model(tmp_path / "ds"), SCRIPT_CONFIG)
    # fit(max_length=Batch(12), validation_period=Batch(4), checkpoint_period=Batch(8))
    assert [s.total_batches for s in detail.steps] == [4, 8, 12]
    assert [v.total_batches for v in detail.validations] == [4, 8, 12]
    assert {"validation_loss", "accuracy"} <= set(from_struct(detail.validations[-1].metrics))
    # checkpoint_policy="best" (Determined's default): the first validation (4) is the best so far.
    assert [c.total_batches for c in detail.checkpoints] == [4, 8, 12]
    text = logs(cluster, detail.trial.id)
    assert "[rank 0] " in text and "[rank 1] " in text


# What each ZeRO stage's checkpoint holds on 2 ranks: stages 1 and 2 partition the optimizer state
# (one model file), stage 3 the parameters too (one model file per rank).
_OPTIM = [f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)]
ZERO_FILES = {
    1: sorted(["mp_rank_00_model_states.pt", *_OPTIM]),
    2: sorted(["mp_rank_00_model_states.pt", *_OPTIM]),
    3: sorted([*_OPTIM, *(f"zero_pp_rank_{r}_mp_rank_00_model_states.pt" for r in (0, 1))]),
}


# One launch for the three stages: DeepSpeed's import is most of its minute.
@pytest.mark.timeout(600)
def test_each_zero_stage_checkpoints_every_ranks_partition_and_resumes_exactly(python, tmp_path) -> None:
    model = write_model(tmp_path / "ds")
    (tmp_path / "driver.py").write_text(RESUME_DRIVER)
    out = tmp_path / "out"
    out.mkdir()
    stages = ",".join(str(s) for s in ZERO_FILES)
    code, output = launch_ranks(python, tmp_path / "driver.py", [str(model), str(out), stages], ranks=2)
    assert code == 0, output[-3000:]
    for stage, files in ZERO_FILES.items():
        stored = sorted(p.name for p in (out / f"stage{stage}" / "rank0" / "model0").iterdir())
        assert stored == files, f"ZeRO stage {stage}"
        for rank in range(2):
            result = json.loads((out / f"stage{stage}" / f"result{rank}.json").read_text())
            assert result["resumed_at"] == 3, f"ZeRO stage {stage}"
            assert result["resumed"] == result["uninterrupted"], f"ZeRO stage {stage}"


# DeepSpeedTrialContext's accessors as Determined's reference describes them, on one gloo rank: the
# epoch's first and last batch (128 examples in micro-batches of 4, 2 per batch: 16 batches an
# epoch), the batch a restored run starts from, a torch profiler writing traces to the run's
# TensorBoard directory, and no pipeline parallelism (a PipelineEngine refused in one line).
CONTEXT_DRIVER = """
import json, os, sys
import deepspeed, torch
import torch.distributed as dist
dist.init_process_group("gloo")
from pedl.harness.compat import ensure_determined_importable
ensure_determined_importable()
from pedl import _trial_context
_trial_context.set_experiment_config({})
sys.path.insert(0, sys.argv[1])
import model_def

class Seen(model_def.TinyDeepSpeedTrial):
    def __init__(self, context):
        super().__init__(context)
        self.seen = []
        try:
            context.is_epoch_start()
            self.before = "answered"
        except RuntimeError as e:
            self.before = str(e)
        if context.get_hparams().get("profile"):
            context.set_profiler(
                activities=[torch.profiler.ProfilerActivity.CPU],
                schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
            )

    def train_batch(self, dataloader_iter, epoch_idx, batch_idx):
        c = self.context
        self.seen.append([batch_idx, c.is_epoch_start(), c.is_epoch_end(), c.get_initial_batch()])
        return super().train_batch(dataloader_iter, epoch_idx, batch_idx)

hparams = {"lr": 0.1, "zero_stage": 1}
first = Seen.create_controller({**hparams, "profile": True}, None, "test")
first.train_until(17)
first.save(sys.argv[2])
second = Seen.create_controller(hparams, None, "test")
at_init = second.context.get_initial_batch()
second.load(sys.argv[2])
second.train_until(18)
pipe = deepspeed.pipe.PipelineModule(layers=[torch.nn.Linear(4, 2)], num_stages=1)
engine, _, _, _ = deepspeed.initialize(
    model=pipe, model_parameters=pipe.parameters(),
    config={"train_batch_size": 4, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}},
)
try:
    second.context.wrap_model_engine(engine)
    refused = ""
except RuntimeError as e:
    refused = str(e)
with open(os.path.join(sys.argv[3], "result.json"), "w") as f:
    json.dump({"before": first.trial.before, "first": first.trial.seen, "at_init": at_init,
               "second": second.trial.seen, "pipeline": second.context.use_pipeline_parallel,
               "refused": refused}, f)
"""


@pytest.mark.timeout(600)
def test_the_deepspeed_context_knows_epochs_the_initial_batch_the_profiler_and_no_pipeline(
    python, tmp_path
) -> None:
    model = write_model(tmp_path / "ds")
    (tmp_path / "driver.py").write_text(CONTEXT_DRIVER)
    checkpoint, out, board = tmp_path / "ckpt", tmp_path / "out", tmp_path / "tensorboard"
    for d in (checkpoint, out, board):
        d.mkdir()
    env = {**os.environ, TENSORBOARD_ENV: str(board)}
    args = [str(model), str(checkpoint), str(out)]
    code, output = launch_ranks(python, tmp_path / "driver.py", args, ranks=1, env=env)
    assert code == 0, output[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert "known once training has started" in result["before"]
    # One row per micro-batch (2 a batch): [batch_idx, is_epoch_start, is_epoch_end, initial batch].
    first = {row[0]: row[1:] for row in result["first"]}
    assert first[0] == [True, False, 0] and first[1] == [False, False, 0]
    assert first[15] == [False, True, 0] and first[16] == [True, False, 0]
    assert result["at_init"] == 0
    assert result["second"] == [[17, False, False, 17]] * 2
    assert result["pipeline"] is False
    assert "pedl does not support DeepSpeed pipeline parallelism" in result["refused"]
    traces = list(board.rglob("*.pt.trace.json"))
    assert traces, sorted(p.name for p in board.rglob("*"))
