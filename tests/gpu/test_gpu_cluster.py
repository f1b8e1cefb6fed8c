"""A real local cluster (checkpoint store, scheduler, agent) on a GPU machine: the agent offers its
GPU, a trial trains on it, a gang no agent can hold is refused at create, and a gang of CPU slots
on that machine still trains with gloo. Skipped where torch sees no GPU."""

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


def test_a_gang_over_a_gpu_slot_and_a_cpu_slot_fails_at_once_naming_the_mix(tmp_path) -> None:
    """An agent with a GPU and `--slots 1` offers both kinds; NCCL cannot span them. The ranks say so
    together instead of waiting on each other's rendezvous for half an hour."""
    if len(detect_gpus()) != 1:
        pytest.skip("needs an agent of exactly one GPU")
    with local_cluster(tmp_path / "cluster", slots=1) as cluster:
        model = write_model(tmp_path / "seed", SEED_TRIAL)
        exp_id = submit(cluster, model, config(extra=TWO_SLOTS + "max_restarts: 0\n"))
        result = wait(cluster, exp_id, timeout=180)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR, cluster.logs()
        (trial,) = result.trials
        text = trial.error + logs(cluster, trial.id)
        assert "ranks 0 of this trial run on GPU slots and ranks 1 on CPU slots" in text, text
