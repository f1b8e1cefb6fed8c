"""The experiment config is parsed once per process: the API parses the request's YAML, the scheduler
keeps that typed object (storage check, create, StartTrial), and an agent and a harness each decode the
versioned document once; none of them parses the YAML or derives the lengths again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_agent_messages import Scenario, run

import pedl.config.experiment as experiment
from pedl.config import ExperimentConfig, carried, parse_experiment_config
from pedl.harness.trial_config import load_trial_config
from pedl.v1 import agent_pb2
from pedl_agent.model_definitions import ModelDefinitionCache
from pedl_agent.model_trees import ModelTrees
from pedl_agent.ranks import plan_ranks
from pedl_agent.run_settings import RunSettings
from pedl_agent.trial_run import TrialRun
from pedl_scheduler.storage_check import check_checkpoint_storage

USER_CONFIG = """
hyperparameters: {global_batch_size: 8, lr: 0.1}
records_per_epoch: 80
searcher: {name: single, metric: error, max_length: {epochs: 2}}
environment: {environment_variables: [FOO=bar]}
"""


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every parse of a config in this process (all of them go through experiment._build)."""
    seen: list[Any] = []
    build = experiment._build

    def counting(data: Any) -> ExperimentConfig:
        seen.append(data)
        return build(data)

    monkeypatch.setattr(experiment, "_build", counting)
    yield seen


def test_a_create_parses_once_and_the_trial_gets_the_parsed_object(tmp_path: Path, parses: list[Any]) -> None:
    async def body() -> None:
        s = Scenario(tmp_path / "pedl.db", slots=1)
        config = parse_experiment_config(USER_CONFIG)  # what the API's CreateExperiment does, once
        check_checkpoint_storage(config)
        s.manager.create_experiment(config, b"model", "model")
        s.manager.tick(0)
        (start,) = [m.start_trial for m in s.sent() if m.WhichOneof("message") == "start_trial"]
        assert len(parses) == 1
        decoded = carried.decoded
        # The agent's side: one decode per run, however many ranks read the environment and mounts.
        run_ = TrialRun(start, _settings(tmp_path))
        run_._ranks = plan_ranks(start, free_port=lambda: 4321)
        assert run_.environment(0)["FOO"] == "bar" and run_.config is not None
        assert run_.environment(0)["FOO"] == "bar"
        # The harness's side: one decode, and the lengths the scheduler derived.
        assert load_trial_config(start.config_json).max_length_batches == 20
        assert carried.decoded == decoded + 2
        assert len(parses) == 1
        s.manager.db.close()

    run(body)


def test_the_yaml_given_to_the_manager_is_parsed_once(tmp_path: Path, parses: list[Any]) -> None:
    async def body() -> None:
        s = Scenario(tmp_path / "pedl.db", slots=1)
        s.manager.create_experiment(USER_CONFIG, b"model", "model")
        s.manager.tick(0)
        assert len(parses) == 1
        s.manager.db.close()

    run(body)


def _settings(tmp_path: Path) -> RunSettings:
    return RunSettings(
        harness_argv=["python", "-m", "pedl.harness"],
        work_dir=tmp_path,
        socket_dir=tmp_path,
        model_definitions=ModelTrees(ModelDefinitionCache("127.0.0.1:1", tmp_path), tmp_path / "trees"),
        send=lambda message: None,
    )


def test_the_document_is_what_crosses_to_agents() -> None:
    start = agent_pb2.StartTrial(config_json=carried.to_json(parse_experiment_config(USER_CONFIG)))
    assert start.config_json.startswith('{"version":1,')
