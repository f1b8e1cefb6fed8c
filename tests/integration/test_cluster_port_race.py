"""The test clusters' own start survives the race every cluster test runs: the scheduler's port is
chosen free, told to the checkpoint store, and bound a moment later; when another process took it in
between, the store and scheduler start again on a new port instead of failing the test."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import processes


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def test_a_scheduler_port_taken_before_it_binds_moves_the_cluster_to_another(
    tmp_path: Path, taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    ports = iter([taken_port])
    real = processes.free_port
    monkeypatch.setattr(processes, "free_port", lambda: next(ports, None) or real())
    with processes.local_cluster(tmp_path, agents=1) as cluster:
        assert cluster.master != f"127.0.0.1:{taken_port}"
        assert f"Failed to bind to address 127.0.0.1:{taken_port}" in (tmp_path / "scheduler.log").read_text()


def test_a_server_whose_port_was_taken_is_started_again_on_another_and_other_errors_are_raised(
    taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    ports = iter([taken_port])
    real = processes.free_port
    monkeypatch.setattr(processes, "free_port", lambda: next(ports, None) or real())
    tried: list[int] = []

    def bind(port: int) -> int:
        tried.append(port)
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # OSError "Address already in use" on the taken one
            return port

    assert processes.on_a_free_port(bind) != taken_port
    assert tried[0] == taken_port and len(tried) == 2

    def broken(port: int) -> int:
        tried.append(port)
        raise ValueError("a configuration error")

    tried.clear()
    with pytest.raises(ValueError, match="a configuration error"):
        processes.on_a_free_port(broken)
    assert len(tried) == 1  # not a taken port: no second start
