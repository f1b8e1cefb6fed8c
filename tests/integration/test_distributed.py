"""A trial on 2 slots of one agent: 2 harness processes training with DDP over gloo."""

from __future__ import annotations

import os

import pytest
from test_cluster import logs, stub, submit, wait

from pedl._metrics import from_struct
from pedl.v1 import common_pb2, scheduler_pb2
from support.determined_models import write_stopping_trial
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration

TWO_SLOTS = "resources:\n  slots_per_trial: 2\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One 2-slot agent for the tests that leave it as they found it (a start costs seconds on a
    loaded machine; each test reads only its own experiment)."""
    with local_cluster(tmp_path_factory.mktemp("cluster"), agents=1, slots=2) as c:
        try:
            yield c
        except BaseException:
            print(c.logs())
            raise


def test_a_two_slot_trial_trains_on_both_ranks_and_completes(cluster, tmp_path) -> None:
    config = tiny_config(max_batches=40, extra=TWO_SLOTS)
    exp_id = submit(cluster, write_tiny_model(tmp_path / "tiny"), config)
    result = wait(cluster, exp_id, timeout=240)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    (trial,) = result.trials
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    assert [s.total_batches for s in detail.steps] == [10, 20, 30, 40]
    assert all({"loss", "accuracy"} <= set(from_struct(s.metrics)) for s in detail.steps)
    assert [v.total_batches for v in detail.validations] == [20, 40]
    assert detail.checkpoints and detail.checkpoints[-1].total_batches == 40
    text = logs(cluster, trial.id)
    assert "[rank 0] " in text and "[rank 1] " in text


TRAINER_SCRIPT = """
from determined import pytorch
from model_def import StoppingTrial

with pytorch.init() as context:
    trainer = pytorch.Trainer(StoppingTrial(context), context)
    trainer.fit(max_length=pytorch.Batch(8), validation_period=pytorch.Batch(4),
                checkpoint_period=pytorch.Batch(4))
"""
TRAINER_CONFIG = """
hyperparameters: {global_batch_size: 8, lr: 0.1, stop_at: 0}
searcher: {name: single, metric: validation_loss, max_length: {batches: 8}}
resources: {slots_per_trial: 2}
checkpoint_storage: {save_trial_latest: 10}
max_restarts: 0
entrypoint: python3 -m determined.launch.torch_distributed python3 main.py
"""


def test_a_pytorch_trainer_script_on_two_slots_trains_both_ranks_and_the_chief_reports(
    cluster, tmp_path
) -> None:
    """Determined 0.38's `det.pytorch.init()` joins the slots' process group; every rank trains its
    shard and saves; the chief alone reports metrics and stores checkpoints."""
    model = write_stopping_trial(tmp_path / "trainer")
    (model / "main.py").write_text(TRAINER_SCRIPT)
    result = wait(cluster, submit(cluster, model, TRAINER_CONFIG), timeout=240)
    (trial,) = result.trials
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, logs(cluster, trial.id)
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    assert [s.total_batches for s in detail.steps] == [4, 8]
    assert [v.total_batches for v in detail.validations] == [4, 8]
    assert [c.total_batches for c in detail.checkpoints] == [4, 8]
    text = logs(cluster, trial.id)
    assert "[rank 0] " in text and "[rank 1] " in text


def test_a_failing_rank_fails_the_trial_with_its_traceback(cluster, tmp_path) -> None:
    body = "if torch.distributed.get_rank() == 1: raise ValueError('rank one is broken')"
    model = write_tiny_model(tmp_path / "broken", build_model_body=body)
    exp_id = submit(cluster, model, tiny_config(extra=TWO_SLOTS + "max_restarts: 0\n"))
    result = wait(cluster, exp_id, timeout=240)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
    (trial,) = result.trials
    assert "rank 1 failed" in trial.error and "ValueError: rank one is broken" in trial.error, trial.error
    text = logs(cluster, trial.id)
    assert "[rank 1] Traceback" in text and "[rank 1] ValueError: rank one is broken" in text


def test_a_four_slot_trial_runs_as_one_gang_over_two_two_slot_agents(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", agents=2, slots=2) as cluster:
        config = tiny_config(max_batches=20, extra="resources:\n  slots_per_trial: 4\n")
        exp_id = submit(cluster, write_tiny_model(tmp_path / "tiny"), config)
        result = wait(cluster, exp_id, timeout=240)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        (trial,) = result.trials
        text = logs(cluster, trial.id)
        assert "agent agent0 (slots cpu0, cpu1); agent agent1 (slots cpu0, cpu1)" in text or (
            "agent agent1 (slots cpu0, cpu1); agent agent0 (slots cpu0, cpu1)" in text
        ), text
        for rank in range(4):
            assert f"[rank {rank}] " in text
        detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
        assert [s.total_batches for s in detail.steps] == [10, 20]


def test_a_trial_no_agent_arrangement_can_hold_is_refused_at_create(cluster, tmp_path) -> None:
    import grpc

    config = tiny_config(extra="resources:\n  slots_per_trial: 3\n")
    with pytest.raises(grpc.RpcError) as error:
        submit(cluster, write_tiny_model(tmp_path / "tiny"), config)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "slots_per_trial is 3" in error.value.details() and "2 in all" in error.value.details()


def test_on_an_agent_offering_a_gpu_and_cpu_slots_a_two_slot_trial_runs_on_cpu_slots_only(
    tmp_path, monkeypatch
) -> None:
    """A fake nvidia-smi lists one GPU, so `--slots 2` offers gpu0, cpu0, cpu1. The gang never mixes
    kinds: it takes both CPU slots (not gpu0 + cpu0), and 3 slots, held only by mixing, are refused."""
    import grpc

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho '0, GPU-00000000-fake, Fake GPU'\n")
    (fake / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    with local_cluster(tmp_path / "cluster", agents=1, slots=2) as cluster:
        (agent,) = stub(cluster).ListAgents(scheduler_pb2.ListAgentsRequest()).agents
        assert [(s.id, s.type) for s in agent.slots] == [("gpu0", "gpu"), ("cpu0", "cpu"), ("cpu1", "cpu")]
        with pytest.raises(grpc.RpcError) as error:
            submit(cluster, write_tiny_model(tmp_path / "three"), tiny_config(extra=THREE_SLOTS))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "slots of one type" in error.value.details(), error.value.details()
        exp_id = submit(
            cluster, write_tiny_model(tmp_path / "tiny"), tiny_config(max_batches=20, extra=TWO_SLOTS)
        )
        result = wait(cluster, exp_id, timeout=240)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        (trial,) = result.trials
        text = logs(cluster, trial.id)
        assert "started on agent agent0 (slots cpu0, cpu1)" in text, text
        assert "[rank 0] " in text and "[rank 1] " in text


THREE_SLOTS = "resources:\n  slots_per_trial: 3\n"
