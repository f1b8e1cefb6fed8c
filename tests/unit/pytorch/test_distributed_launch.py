"""The launch of a distributed trial: the agent's rank plan and env, the harness reading it back."""

from __future__ import annotations

import pytest

from pedl.harness.distributed import Launch, is_peer_failure, launch_from_env
from pedl.v1 import agent_pb2
from pedl_agent.process_exits import culprit as _culprit
from pedl_agent.ranks import Ranks, plan_ranks


def start(slots: int, **fields: object) -> agent_pb2.StartTrial:
    return agent_pb2.StartTrial(trial_id=1, run_id=1, slot_ids=[f"cpu{i}" for i in range(slots)], **fields)


def test_one_slot_or_none_runs_a_single_process_without_a_group() -> None:
    assert plan_ranks(start(1, world_size=1)) == Ranks(0, 1, 1)
    assert plan_ranks(start(0, world_size=0)) == Ranks(0, 1, 1)
    assert not plan_ranks(start(1)).distributed


def test_all_slots_of_one_agent_rendezvous_on_a_free_local_port() -> None:
    assert plan_ranks(start(2, world_size=2), free_port=lambda: 4321) == Ranks(0, 2, 2, "127.0.0.1", 4321)
    assert plan_ranks(start(3), free_port=lambda: 1).world_size == 3  # world_size unset: the slots


def test_a_gang_member_uses_the_schedulers_rendezvous() -> None:
    plan = plan_ranks(start(2, rank=2, world_size=4, rendezvous_address="10.0.0.5:29400"))
    assert plan == Ranks(2, 2, 4, "10.0.0.5", 29400)
    assert plan_ranks(start(2, world_size=4, rendezvous_address="[::1]:7")).master_addr == "::1"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"rank": 2, "world_size": 4}, "needs the chief's rendezvous_address"),
        ({"rank": 0, "world_size": 4}, "needs the chief's rendezvous_address"),
        ({"rank": 3, "world_size": 4, "rendezvous_address": "h:1"}, "do not fit world_size 4"),
        ({"world_size": 2, "rendezvous_address": "nohost"}, "is not host:port"),
        ({"world_size": 2, "rendezvous_address": "h:99999"}, "is not host:port"),
    ],
)
def test_inconsistent_ranks_are_refused(fields: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        plan_ranks(start(2, **fields))


def test_the_reported_failure_is_a_real_one_before_a_lost_peer_before_a_signal() -> None:
    assert _culprit([(0, 0), (1, 0)]) is None
    assert _culprit([(0, 3), (1, 1)]) == (1, 1)
    assert _culprit([(1, -9), (0, 3)]) == (0, 3)
    assert _culprit([(1, -9), (0, -15)]) == (1, -9)


def test_the_harness_reads_its_rank_from_the_environment() -> None:
    assert launch_from_env({}) is None
    assert launch_from_env({"WORLD_SIZE": "1"}) is None
    env = {
        "WORLD_SIZE": "4",
        "RANK": "3",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "h",
        "MASTER_PORT": "5",
    }
    launch = launch_from_env(env)
    assert launch == Launch(3, 1, 4, 2, "h", 5)
    assert not launch.is_chief and not launch.is_local_chief
    with pytest.raises(ValueError, match="RANK 4 is not in"):
        launch_from_env({**env, "RANK": "4"})
    with pytest.raises(ValueError, match="MASTER_PORT must be an integer"):
        launch_from_env({**env, "MASTER_PORT": "x"})
    with pytest.raises(ValueError, match="MASTER_ADDR is not set"):
        launch_from_env({k: v for k, v in env.items() if k != "MASTER_ADDR"})


def test_lost_peers_are_told_apart_from_errors() -> None:
    peer = RuntimeError("[pair.cc:553] Connection closed by peer [127.0.0.1]:50841")
    assert is_peer_failure(peer)
    try:
        try:
            raise peer
        except RuntimeError as e:
            raise ValueError("wrapped") from e
    except ValueError as wrapped:
        assert is_peer_failure(wrapped)
    assert not is_peer_failure(ValueError("bad layer size"))
