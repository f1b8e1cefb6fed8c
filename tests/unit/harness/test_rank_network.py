"""Where a trial's ranks listen when it spans machines, and the one error when they cannot meet."""

from __future__ import annotations

import threading

import pytest

from pedl import _interfaces
from pedl.harness import rank_network
from pedl.harness.failure import failure_signature
from pedl.harness.rank_network import RanksUnreachable

torch_distributed = pytest.importorskip("torch.distributed")


def test_the_interface_carrying_the_agents_address_is_named_for_gloo_and_nccl() -> None:
    environ = {"PEDL_AGENT_ADDRESS": "127.0.0.1"}
    assert rank_network.choose_interfaces(environ) == "lo"
    assert environ["GLOO_SOCKET_IFNAME"] == "lo" and environ["NCCL_SOCKET_IFNAME"] == "=lo"


def test_what_the_user_set_stands() -> None:
    environ = {"PEDL_AGENT_ADDRESS": "127.0.0.1", "GLOO_SOCKET_IFNAME": "eth7", "NCCL_SOCKET_IFNAME": "ib"}
    rank_network.choose_interfaces(environ)
    assert environ["GLOO_SOCKET_IFNAME"] == "eth7" and environ["NCCL_SOCKET_IFNAME"] == "ib"


def test_an_address_no_interface_here_carries_names_none() -> None:
    environ = {"PEDL_AGENT_ADDRESS": "198.18.0.250"}
    assert rank_network.choose_interfaces(environ) is None
    assert "GLOO_SOCKET_IFNAME" not in environ


def run_ranks(environs: list[dict[str, str]]) -> list[BaseException | None]:
    """check_reachable on one thread per rank, sharing an in-process store."""
    store = torch_distributed.HashStore()
    outcome: list[BaseException | None] = [None] * len(environs)

    def rank(r: int) -> None:
        try:
            rank_network.check_reachable(store, r, len(environs), environs[r])
        except BaseException as e:  # noqa: BLE001 - handed to the test
            outcome[r] = e

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(environs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return outcome


def test_ranks_that_reach_each_other_pass() -> None:
    assert run_ranks([{"GLOO_SOCKET_IFNAME": "lo"}] * 3) == [None, None, None]


def test_a_rank_that_cannot_listen_fails_every_rank_with_each_ranks_address() -> None:
    outcome = run_ranks([{"GLOO_SOCKET_IFNAME": "lo"}, {"GLOO_SOCKET_IFNAME": "nosuch0"}])
    assert all(isinstance(e, RanksUnreachable) for e in outcome), outcome
    text = str(outcome[0])
    assert str(outcome[1]) == text
    assert "rank 0 listens on 127.0.0.1:" in text and "(GLOO_SOCKET_IFNAME=lo)" in text
    assert "rank 1 cannot listen: GLOO_SOCKET_IFNAME=nosuch0 names no interface" in text
    assert "--address" in text and "NCCL_SOCKET_IFNAME" in text


def test_the_message_names_who_cannot_connect_to_whom() -> None:
    everyone = [
        rank_network.Listening(0, "127.0.0.1", 5000, "hostname vm, GLOO_SOCKET_IFNAME unset"),
        rank_network.Listening(1, "10.0.0.2", 6000, "GLOO_SOCKET_IFNAME=eth0"),
    ]
    text = rank_network.unreachable_message(everyone, {0: {}, 1: {"0": "Connection refused"}})
    assert "rank 0 listens on 127.0.0.1:5000 (hostname vm, GLOO_SOCKET_IFNAME unset)" in text
    assert "rank 1 cannot connect to rank 0 at 127.0.0.1:5000: Connection refused" in text


def test_unreachable_ranks_are_a_failure_no_restart_cures(tmp_path) -> None:
    signature = failure_signature(RanksUnreachable("rank 1 cannot connect"), tmp_path)
    assert signature is not None and signature.permanent
    assert signature.exception_type == "pedl.harness.rank_network.RanksUnreachable"


def test_interfaces_are_found_by_address_or_name() -> None:
    found = {"lo": ["127.0.0.1", "::1"], "eth0": ["10.0.0.2"]}
    assert _interfaces.interface_for("10.0.0.2", found) == "eth0"
    assert _interfaces.interface_for("localhost", found) == "lo"
    assert _interfaces.interface_for("10.0.0.3", found) is None
    assert _interfaces.first_address("eth0", found) == "10.0.0.2"
    assert _interfaces.interface_for("127.0.0.1") == "lo"  # this machine's own
