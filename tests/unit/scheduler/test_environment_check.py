"""Creating an experiment whose Python environment no connected agent offers is refused up front."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pedl.v1 import agent_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager, UserError


def manager(*environments: list[str]) -> ExperimentManager:
    cluster = Cluster()
    for i, offered in enumerate(environments):
        cluster.connect(agent_pb2.RegisterAgent(agent_id=f"a{i}", environments=offered))
    return SimpleNamespace(cluster=cluster)  # type: ignore[return-value]


def test_an_environment_no_agent_offers_is_refused_with_the_offered_names() -> None:
    with pytest.raises(
        UserError, match=r"'tf999' is not offered by any connected agent; they offer: default, tf215"
    ):
        ExperimentManager._check_environment(manager(["default"], ["default", "tf215"]), "tf999")


@pytest.mark.parametrize("name", [None, "default", "tf215"])
def test_offered_environments_and_the_default_pass(name: str | None) -> None:
    ExperimentManager._check_environment(manager(["default"], ["default", "tf215"]), name)


def test_without_connected_agents_the_experiment_may_wait_for_one() -> None:
    ExperimentManager._check_environment(manager(), "tf215")
