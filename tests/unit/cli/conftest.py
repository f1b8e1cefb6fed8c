"""Shared fixtures: an address nothing listens on, and fast polling."""

from __future__ import annotations

import socket

import pytest

from pedl.cli import cmd_experiment


@pytest.fixture
def unused_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setattr(cmd_experiment, "POLL_SECONDS", 0.0)
    monkeypatch.delenv("PEDL_MASTER", raising=False)
    # Each test its own home: logins a test saves never reach the next one (nor the user's ~/.pedl).
    monkeypatch.setenv("PEDL_HOME", str(tmp_path_factory.mktemp("pedl-home")))
