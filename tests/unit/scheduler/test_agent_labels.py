"""resources.agent_label: a trial runs only on agents started with `pedl-agent --label` of that name,
and an unlabeled trial only on unlabeled agents; create refuses a label no connected agent has."""

from __future__ import annotations

import pytest

from pedl.config import parse_experiment_config
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import UserError
from pedl_scheduler.experiments.lifecycle import check_agent_label, check_fits
from pedl_scheduler.scheduling import Agent, ClusterState, QueuedTrial, decide
from pedl_scheduler.scheduling.labels import check_label, offered_keys, placement_key
from pedl_scheduler.scheduling.placement import PoolSlots


def agent(agent_id: str, slots: int, label: str = "", *environments: str) -> Agent:
    ids = tuple(f"{agent_id}/{i}" for i in range(slots))
    return Agent(agent_id, ids, ids, "default", offered_keys(environments or ("default",), label))


def queued(trial_id: int, slots: int = 1, label: str = "", environment: str = "default") -> QueuedTrial:
    return QueuedTrial(trial_id, 1, slots, environment=placement_key(environment, label))


def placed(state: ClusterState) -> dict[int, tuple[str, ...]]:
    return {t: tuple(a.agent_id for a in alloc) for t, alloc in decide(state).assignments.items()}


def test_a_labelled_trial_runs_only_on_agents_with_its_label_and_an_unlabelled_one_only_on_the_rest() -> None:
    agents = [agent("plain", 4), agent("big", 1, "gpu")]
    state = ClusterState(agents, queued=[queued(1, label="gpu"), queued(2), queued(3, label="gpu")])
    assert placed(state) == {1: ("big",), 2: ("plain",)}  # trial 3 waits for the labelled agent


def test_label_and_environment_both_hold() -> None:
    agents = [agent("a", 2, "gpu"), agent("b", 2, "gpu", "default", "tf215"), agent("c", 2, "", "tf215")]
    state = ClusterState(agents, queued=[queued(1, label="gpu", environment="tf215")])
    assert placed(state) == {1: ("b",)}
    shape = PoolSlots(agents)
    assert shape.could_ever_fit(4, placement_key("default", "gpu"))
    assert not shape.could_ever_fit(4, placement_key("tf215", "gpu"))
    assert not shape.could_ever_fit(1, placement_key("default", "tpu"))


def test_label_names() -> None:
    assert check_label("gpu") is None
    assert check_label("gpu@rack") and check_label(" gpu") and check_label("")


def connected(*labels: str) -> dict:
    cluster = Cluster()
    for i, label in enumerate(labels):
        cluster.connect(
            agent_pb2.RegisterAgent(agent_id=f"a{i}", label=label, slots=[common_pb2.Slot(id="0")])
        )
    return cluster.agents


def config(label: str | None) -> object:
    extra = f"resources: {{agent_label: {label}}}\n" if label is not None else ""
    return parse_experiment_config(
        "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n" + extra
    )


def test_create_refuses_a_label_no_connected_agent_has() -> None:
    with pytest.raises(
        UserError, match=r"resources.agent_label 'tpu': no connected agent of pool 'default' has"
    ):
        check_agent_label(connected("", "gpu"), config("tpu"))
    with pytest.raises(UserError, match="every connected agent of pool 'default' has a label \\(gpu\\)"):
        check_agent_label(connected("gpu"), config(None))


@pytest.mark.parametrize(("labels", "label"), [(("", "gpu"), "gpu"), (("", "gpu"), None), ((), "tpu")])
def test_create_accepts_a_label_an_agent_has_or_while_none_is_connected(labels, label) -> None:
    agents = connected(*labels)
    check_agent_label(agents, config(label))
    check_fits(agents, config(label))
