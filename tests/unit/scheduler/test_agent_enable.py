"""`det agent|slot disable`: placement sees no free slots there; running trials keep theirs; an
agent that reconnects stays disabled."""

from __future__ import annotations

import pytest

from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import Cluster


def register(agent_id: str = "a1") -> agent_pb2.RegisterAgent:
    slots = [common_pb2.Slot(id="0", type="cpu"), common_pb2.Slot(id="1", type="cpu")]
    return agent_pb2.RegisterAgent(agent_id=agent_id, slots=slots, accepts_handoffs=True)


def test_a_disabled_slot_is_not_free_and_comes_back_when_enabled() -> None:
    cluster = Cluster()
    agent = cluster.connect(register())
    cluster.set_enabled("a1", "0", False)
    assert agent.free_slots() == ("1",)
    assert [s.disabled for s in agent.to_proto().slots] == [True, False]
    cluster.set_enabled("a1", "0", True)
    assert agent.free_slots() == ("0", "1")


def test_slots_are_also_named_by_their_position_as_determined_numbers_them() -> None:
    cluster = Cluster()
    slots = [common_pb2.Slot(id="cpu0", type="cpu"), common_pb2.Slot(id="cpu1", type="cpu")]
    agent = cluster.connect(agent_pb2.RegisterAgent(agent_id="a1", slots=slots))
    cluster.set_enabled("a1", "1", False)
    assert agent.free_slots() == ("cpu0",)
    with pytest.raises(KeyError, match="has no slot '2'"):
        cluster.set_enabled("a1", "2", False)


def test_a_disabled_agent_drains_and_stays_disabled_across_a_reconnect() -> None:
    cluster = Cluster()
    agent = cluster.connect(register())
    agent.hold("0", 7)
    cluster.set_enabled("a1", "", False)
    assert agent.free_slots() == () and agent.handoff_slots({7}) == ()
    assert agent.used == {"0": 7}  # the running trial keeps its slot
    again = cluster.connect(register())
    assert again.disabled and again.free_slots() == () and again.to_proto().disabled
    cluster.set_enabled("a1", "", True)
    assert again.free_slots() == ("0", "1")


def test_unknown_agents_and_slots_are_named() -> None:
    cluster = Cluster()
    cluster.connect(register())
    with pytest.raises(KeyError, match="agent 'zz' is not connected"):
        cluster.set_enabled("zz", "", False)
    with pytest.raises(KeyError, match="agent 'a1' has no slot '5'"):
        cluster.set_enabled("a1", "5", False)


def test_what_was_disabled_is_stored_and_restored_by_a_new_scheduler(database_url: str) -> None:
    from pedl_scheduler.storage import open_storage
    from pedl_scheduler.storage.ops import agents as agent_ops

    db = open_storage(database_url)
    try:
        cluster = Cluster()
        slots = [common_pb2.Slot(id="cpu0"), common_pb2.Slot(id="cpu1")]
        cluster.connect(agent_pb2.RegisterAgent(agent_id="a1", slots=slots))
        cluster.connect(register("a2"))
        for agent_id, slot, enabled in (("a1", "1", False), ("a2", "", False), ("a2", "", False)):
            agent, slot_id = cluster.set_enabled(agent_id, slot, enabled)
            agent_ops.set_disabled(db, agent.id, slot_id, not enabled)
        assert agent_ops.disabled(db) == [("a1", "cpu1"), ("a2", "")]  # the slot by its id, once

        restarted = Cluster()
        restarted.restore_disabled(agent_ops.disabled(db))
        a1 = restarted.connect(agent_pb2.RegisterAgent(agent_id="a1", slots=slots))
        a2 = restarted.connect(register("a2"))
        assert a1.free_slots() == ("cpu0",) and a2.free_slots() == () and a2.to_proto().disabled

        agent_ops.set_disabled(db, "a2", "", False)
        assert agent_ops.disabled(db) == [("a1", "cpu1")]
    finally:
        db.close()
