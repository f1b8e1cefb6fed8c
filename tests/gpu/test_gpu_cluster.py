"""A real local cluster (checkpoint store, scheduler, agent) on a GPU machine: the agent offers its
GPU, a trial trains on it, a gang no agent can hold is refused at create, and a gang never mixes
GPU and CPU slots: on that machine it takes CPU slots and trains with gloo. Skipped where torch
sees no GPU."""

from __future__ import annotations

import grpc
import pytest

torch = pytest.importorskip("torch")

from gpu_models import SEED_TRIAL, config, write_model  # noqa: E402

from pedl._metrics import from_struct  # noqa: E402
from pedl.v1 import common_pb2, scheduler_pb2  # noqa: E402
from pedl_agent.devices import detect_gpus  # noqa: E402
from support.processes import local_cluster  # noqa: E402
from tests.integration.test_cluster import logs, stub, submit, wait  # noqa: E402

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture
def gpu_cluster(tmp_path):
    """One agent offering only its GPUs (`--slots 0`: no CPU slots)."""
    with local_cluster(tmp_path / "cluster", slots=0) as c:
        try:
            yield c
        except BaseException:
            print(c.logs())
            raise


def test_a_trial_on_the_agents_gpu_slot_trains_on_exactly_that_gpu(gpu_cluster, tmp_path) -> None:
    gpu = detect_gpus()[0]
    agents = stub(gpu_cluster).ListAgents(scheduler_pb2.ListAgentsRequest()).agents
    assert [(s.id, s.type, s.device) for s in agents[0].slots][0] == ("gpu0", "gpu", gpu.uuid)
    model = write_model(tmp_path / "seed", SEED_TRIAL)
    exp_id = submit(gpu_cluster, model, config(extra="optimizations:\n  mixed_precision: O1\n"))
    result = wait(gpu_cluster, exp_id, timeout=240)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, gpu_cluster.logs()
    (trial,) = result.trials
    assert f"visible '{gpu.uuid}' 1" in logs(gpu_cluster, trial.id)
    detail = stub(gpu_cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    assert all(from_struct(s.metrics)["on_cuda"] == 1.0 for s in detail.steps)
    assert all(from_struct(s.metrics)["half"] == 1.0 for s in detail.steps)
    assert detail.checkpoints


def test_two_ranks_on_a_one_gpu_agent_are_refused_at_create(gpu_cluster, tmp_path) -> None:
    if len(detect_gpus()) != 1:
        pytest.skip("needs an agent of exactly one GPU")
    with pytest.raises(grpc.RpcError) as error:
        submit(gpu_cluster, write_model(tmp_path / "seed", SEED_TRIAL), config(extra=TWO_SLOTS))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "slots_per_trial is 2" in error.value.details() and "1 in all" in error.value.details()


TWO_SLOTS = "resources:\n  slots_per_trial: 2\n"


def test_a_gang_that_only_a_gpu_and_a_cpu_slot_could_hold_is_refused_at_create(tmp_path) -> None:
    """An agent with one GPU and `--slots 1` offers both kinds; NCCL cannot span them, so the
    scheduler never mixes kinds in a gang, and create says that types are the reason."""
    if len(detect_gpus()) != 1:
        pytest.skip("needs an agent of exactly one GPU")
    with local_cluster(tmp_path / "cluster", slots=1) as cluster:
        with pytest.raises(grpc.RpcError) as error:
            submit(cluster, write_model(tmp_path / "seed", SEED_TRIAL), config(extra=TWO_SLOTS))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        details = error.value.details()
        assert "slots_per_trial is 2" in details and "slots of one type" in details, details
        assert "gpu slots: at most 1 on one agent" in details and "cpu slots: at most 1" in details, details


def test_on_a_gpu_agent_with_cpu_slots_a_gang_takes_the_cpu_slots_and_a_single_rank_the_gpu(tmp_path) -> None:
    """`--slots 2` on a one-GPU machine offers gpu0, cpu0, cpu1: a 2-slot trial runs on the two CPU
    slots over gloo (never gpu0 + cpu0), and a 1-slot trial gets the GPU, the preferred kind."""
    gpus = detect_gpus()
    if len(gpus) != 1:
        pytest.skip("needs an agent of exactly one GPU")
    with local_cluster(tmp_path / "cluster", slots=2) as cluster:
        model = write_model(tmp_path / "seed", SEED_TRIAL)
        gang = wait(cluster, submit(cluster, model, config(extra=TWO_SLOTS)), timeout=240)
        assert gang.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        (trial,) = gang.trials
        text = logs(cluster, trial.id)
        assert "started on agent agent0 (slots cpu0, cpu1)" in text, text
        detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
        assert all(from_struct(s.metrics)["on_cuda"] == 0.0 for s in detail.steps)
        single = wait(cluster, submit(cluster, model, config()), timeout=240)
        assert single.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        (trial,) = single.trials
        text = logs(cluster, trial.id)
        assert "started on agent agent0 (slots gpu0)" in text and f"visible '{gpus[0].uuid}' 1" in text, text
