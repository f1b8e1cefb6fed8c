"""Creating an experiment whose Python environment no connected agent offers is refused up front."""

from __future__ import annotations

import pytest

from pedl.v1 import agent_pb2
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.experiments import UserError
from pedl_scheduler.experiments.lifecycle import check_environment


def agents(*environments: list[str]) -> dict[str, AgentHandle]:
    cluster = Cluster()
    for i, offered in enumerate(environments):
        cluster.connect(agent_pb2.RegisterAgent(agent_id=f"a{i}", environments=offered))
    return cluster.agents


def test_an_environment_no_agent_offers_is_refused_with_the_offered_names() -> None:
    with pytest.raises(
        UserError, match=r"'tf999' is not offered by any connected agent; they offer: default, tf215"
    ):
        check_environment(agents(["default"], ["default", "tf215"]), "tf999")


@pytest.mark.parametrize(
    ("name", "able"), [(None, ["a0", "a1"]), ("default", ["a0", "a1"]), ("tf215", ["a1"])]
)
def test_offered_environments_and_the_default_name_the_agents_that_can_run_them(
    name: str | None, able: list[str]
) -> None:
    assert check_environment(agents(["default"], ["default", "tf215"]), name) == able


def test_without_connected_agents_the_experiment_may_wait_for_one() -> None:
    assert check_environment(agents(), "tf215") == []
