"""Determined's DeepSpeedTrial on 2 slots of a real cluster, DeepSpeed's CPU accelerator over gloo:
trains, validates and checkpoints with ZeRO stage 1 (each rank's optimizer partition)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess

import pytest
from test_cluster import logs, stub, submit, wait

from pedl._metrics import from_struct
from pedl.v1 import common_pb2, scheduler_pb2
from support.deepspeed_models import RESUME_DRIVER, config, deepspeed_python, write_model
from support.processes import free_port, local_cluster

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


def _train(cluster, model, **options) -> scheduler_pb2.GetTrialResponse:
    exp_id = submit(cluster, model, config(**options))
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


@pytest.mark.timeout(600)
def test_a_zero_checkpoint_holds_every_ranks_partition_and_resumes_exactly(python, tmp_path) -> None:
    model = write_model(tmp_path / "ds")
    (tmp_path / "driver.py").write_text(RESUME_DRIVER)
    out = tmp_path / "out"
    out.mkdir()
    command = [
        python,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
    ]
    # Its own session, so that the launcher and both ranks are ended together even on failure.
    process = subprocess.Popen(
        [*command, str(tmp_path / "driver.py"), str(model), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=540)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == 0, output[-3000:]
    partitions = sorted(p.name for p in (out / "rank0" / "model0").glob("zero_pp_rank_*_optim_states.pt"))
    assert partitions == [
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt",
    ]
    for rank in range(2):
        result = json.loads((out / f"result{rank}.json").read_text())
        assert result["resumed_at"] == 3
        assert result["resumed"] == result["uninterrupted"]
