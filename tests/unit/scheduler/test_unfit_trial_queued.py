"""A trial no connected agent can hold: refused at create for pedl's own clients (one clear line),
queued with a warning for Determined's REST API, as Determined's master queues it (agents may join
later); it waits without being placed, and a kill ends it CANCELED."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager, UserError
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops

CONFIG = """
searcher: {name: single, metric: error, max_length: {batches: 10}}
resources: {slots_per_trial: 1000}
max_restarts: 0
"""


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[tuple[ExperimentManager, Cluster]]:
    cluster = Cluster()
    cluster.connect(
        agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0"), common_pb2.Slot(id="1")])
    )
    m = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), cluster, "127.0.0.1:1")
    yield m, cluster
    m.db.close()


def test_pedl_refuses_at_create_a_trial_no_connected_agent_can_hold(manager) -> None:
    m, _ = manager
    with pytest.raises(
        UserError, match=r"slots_per_trial is 1000.*\(with 2 slots, 2 in all\) cannot hold it"
    ):
        m.create_experiment(CONFIG, b"model", "model")
    assert experiment_ops.experiment_state(m.db, 1) is None  # nothing created


def test_determined_api_queues_it_with_the_reason_as_a_warning_and_a_kill_cancels_it(manager) -> None:
    m, cluster = manager
    warnings: list[str] = []
    exp_id = m.create_experiment(CONFIG, b"model", "model", warnings=warnings)
    (line,) = warnings
    assert "slots_per_trial is 1000" in line and "queued until agents that can hold it join" in line
    m.tick(0)
    assert cluster.agents["a0"].outbox.empty()  # nothing placed: it waits
    assert experiment_ops.experiment_state(m.db, exp_id) == "ACTIVE"
    m.kill_experiment(exp_id)
    m.tick(0)
    assert experiment_ops.experiment_state(m.db, exp_id) == "CANCELED"


def test_a_trial_that_fits_gives_no_warning(manager) -> None:
    m, _ = manager
    warnings: list[str] = []
    m.create_experiment(CONFIG.replace("1000", "2"), b"model", "model", warnings=warnings)
    assert warnings == []


def test_a_kill_from_outside_any_event_loop_still_cancels(manager) -> None:
    """After an `asyncio.run` elsewhere in the process no event loop is current; a kill made
    synchronously then (a script or test driving the manager) must not fail on waking followers."""
    import asyncio

    m, _ = manager
    asyncio.get_event_loop_policy().set_event_loop(None)  # what asyncio.run leaves behind
    exp_id = m.create_experiment(CONFIG, b"model", "model", warnings=[])
    m.kill_experiment(exp_id)
    assert experiment_ops.experiment_state(m.db, exp_id) == "CANCELED"
