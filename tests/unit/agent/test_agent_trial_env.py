"""environment.environment_variables reach every harness process the agent starts for a trial."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.config import carried, parse_experiment_config
from pedl.v1 import agent_pb2
from pedl_agent.model_definitions import ModelDefinitionCache
from pedl_agent.model_trees import ModelTrees
from pedl_agent.ranks import plan_ranks
from pedl_agent.run_settings import RunSettings
from pedl_agent.trial_run import TrialRun


def trial_run(tmp_path: Path, slots: int, config: dict, cpu_slots: int = 0) -> TrialRun:
    settings = RunSettings(
        cpu_slots=cpu_slots,
        harness_argv=["python", "-m", "pedl.harness"],
        work_dir=tmp_path,
        socket_dir=tmp_path,
        model_definitions=ModelTrees(ModelDefinitionCache("127.0.0.1:1", tmp_path), tmp_path / "trees"),
        send=lambda message: None,
    )
    # The document the scheduler sends: the parsed config, which the agent decodes once.
    parsed = parse_experiment_config(
        {"searcher": {"name": "single", "metric": "loss", "max_length": 1}, **config}
    )
    start = agent_pb2.StartTrial(
        trial_id=1, run_id=1, slot_ids=[f"cpu{i}" for i in range(slots)], config_json=carried.to_json(parsed)
    )
    run = TrialRun(start, settings)
    run._ranks = plan_ranks(start, free_port=lambda: 4321)
    return run


def test_a_list_is_set_in_every_rank(tmp_path: Path) -> None:
    config = {"environment": {"environment_variables": ["FOO=bar", "URL=http://x/?a=b", "OMP_NUM_THREADS=3"]}}
    run = trial_run(tmp_path, 2, config)
    for index in (0, 1):
        env = run.environment(index)
        assert (env["FOO"], env["URL"], env["OMP_NUM_THREADS"]) == ("bar", "http://x/?a=b", "3")
        assert env["RANK"] == str(index)  # pedl's own variables are still its own


def test_per_device_lists_pick_the_cpu_one_on_cpu_slots(tmp_path: Path) -> None:
    config = {"environment": {"environment_variables": {"cpu": ["WHERE=cpu"], "cuda": ["WHERE=gpu"]}}}
    assert trial_run(tmp_path, 1, config).environment(0)["WHERE"] == "cpu"


def test_the_agents_allow_listed_environment_is_kept_and_overridden_by_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANG", "C.UTF-8")  # allow-listed: reaches the trial
    monkeypatch.setenv("FROM_AGENT", "1")  # not allow-listed: the agent's own
    monkeypatch.setenv("TZ", "agent")
    env = trial_run(tmp_path, 1, {"environment": {"environment_variables": ["TZ=config"]}}).environment(0)
    assert env["LANG"] == "C.UTF-8" and env["TZ"] == "config" and "FROM_AGENT" not in env


def test_no_variables_without_the_field(tmp_path: Path) -> None:
    env = trial_run(tmp_path, 1, {}).environment(0)
    assert "FOO" not in env and env["PEDL_TRIAL_ID"] == "1"


def test_a_run_on_some_of_the_cpu_slots_gets_that_share_of_the_cores_as_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert trial_run(tmp_path, 1, {}, cpu_slots=4).environment(0)["OMP_NUM_THREADS"] == "2"
    assert trial_run(tmp_path, 1, {}, cpu_slots=16).environment(0)["OMP_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in trial_run(tmp_path, 1, {}, cpu_slots=1).environment(0)  # all of it
    # The experiment's own value stands.
    config = {"environment": {"environment_variables": ["OMP_NUM_THREADS=3"]}}
    assert trial_run(tmp_path, 1, config, cpu_slots=4).environment(0)["OMP_NUM_THREADS"] == "3"
