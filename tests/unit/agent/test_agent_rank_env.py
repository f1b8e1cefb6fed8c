"""The environment the agent gives each harness rank: its own rank variables, never the agent's."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.v1 import agent_pb2
from pedl_agent.model_definitions import ModelDefinitionCache
from pedl_agent.model_trees import ModelTrees
from pedl_agent.ranks import plan_ranks
from pedl_agent.run_settings import RunSettings
from pedl_agent.trial_run import TrialRun


def trial_run(tmp_path: Path, slots: int, address: str = "") -> TrialRun:
    settings = RunSettings(
        harness_argv=["python", "-m", "pedl.harness"],
        work_dir=tmp_path,
        socket_dir=tmp_path,
        model_definitions=ModelTrees(ModelDefinitionCache("127.0.0.1:1", tmp_path), tmp_path / "trees"),
        send=lambda message: None,
        address=address,
    )
    start = agent_pb2.StartTrial(trial_id=1, run_id=1, slot_ids=[f"cpu{i}" for i in range(slots)])
    run = TrialRun(start, settings)
    run._ranks = plan_ranks(start, free_port=lambda: 4321)
    return run


def test_an_inherited_tf_config_never_reaches_a_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Keras rank's harness writes its own TF_CONFIG from the addresses its ranks exchange; one left
    # in the agent's environment would name another cluster.
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["elsewhere:1"]}}')
    monkeypatch.setenv("RANK", "7")
    single = trial_run(tmp_path, 1).environment(0)
    assert "TF_CONFIG" not in single and "RANK" not in single
    ranks = trial_run(tmp_path, 2)
    for index in (0, 1):
        env = ranks.environment(index)
        assert "TF_CONFIG" not in env
        assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"], env["MASTER_PORT"]) == (
            str(index),
            "2",
            "127.0.0.1",
            "4321",
        )


def test_ranks_advertise_the_agents_configured_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `pedl-agent --address`, ranks on this machine tell their peers that address, not a guess."""
    from pedl.harness.distributed import Launch, reachable_host

    env = trial_run(tmp_path, 2, address="10.1.2.3").environment(1)
    assert env["PEDL_AGENT_ADDRESS"] == "10.1.2.3"
    monkeypatch.setenv("PEDL_AGENT_ADDRESS", env["PEDL_AGENT_ADDRESS"])
    assert reachable_host(Launch(3, 1, 4, 2, "10.9.9.9", 29500)) == "10.1.2.3"
    assert reachable_host(Launch(1, 1, 4, 2, "10.9.9.9", 29500)) == "10.9.9.9"  # the chief's machine


def test_a_harness_inherits_only_allow_listed_variables_and_its_own_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Secrets in the agent's environment (cluster secret, cloud keys, a user token) never reach a trial."""
    for name, value in {
        "PEDL_CLUSTER_SECRET": "s" * 40,
        "PEDL_TOKEN": "the-agents-own-token",
        "AWS_SECRET_ACCESS_KEY": "cloud-key",
        "DATABASE_URL": "postgres://admin:pw@db/pedl",
        "PEDL_HOME": "/root/.pedl",
        "OMP_NUM_THREADS": "3",
        "NCCL_DEBUG": "INFO",
        "PYTHONPATH": "/opt/lib",
        "LC_ALL": "C.UTF-8",
    }.items():
        monkeypatch.setenv(name, value)
    run = trial_run(tmp_path, 1)
    run.start.checkpoint_token = "trial-1-token"
    env = run.environment(0)
    assert env["PEDL_TOKEN"] == "trial-1-token"
    for name in ("PEDL_CLUSTER_SECRET", "AWS_SECRET_ACCESS_KEY", "DATABASE_URL", "PEDL_HOME"):
        assert name not in env
    assert "s" * 40 not in env.values() and "the-agents-own-token" not in env.values()
    assert (env["OMP_NUM_THREADS"], env["NCCL_DEBUG"], env["PYTHONPATH"], env["LC_ALL"]) == (
        "3",
        "INFO",
        "/opt/lib",
        "C.UTF-8",
    )
    assert env["HOME"] == str(run.trial_dir) and env["PATH"]
    assert env["PEDL_HARNESS_SOCKET"] == str(run.socket_path) and env["PEDL_TRIAL_ID"] == "1"
