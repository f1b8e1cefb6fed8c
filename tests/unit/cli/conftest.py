"""Shared fixtures: stand-ins for pedl.config / pedl.context, and an address nothing listens on."""

from __future__ import annotations

import io
import socket
import sys
import tarfile
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from pedl.cli import cmd_experiment


class FakeConfigError(ValueError):
    def __init__(self, message: str, path: str = "", line: int | None = None) -> None:
        super().__init__(message)
        self.message, self.path, self.line = message, path, line


class FakeContextError(Exception):
    pass


@dataclass
class Packed:
    data: bytes
    name: str
    files: list[str]


def _fake_parse(source: str, filename: str | None = None) -> dict[str, object]:
    if "bad_field" in source:
        raise FakeConfigError("must be a positive integer", path="searcher.max_steps", line=4)
    return {}


def _fake_pack(path: Path, max_bytes: int = 96 * 2**20) -> Packed:
    if (Path(path) / "TOO_BIG").exists():
        raise FakeContextError(f"{path} is larger than 96 MiB")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(str(path), arcname=".")
    return Packed(buffer.getvalue(), Path(path).name, [])


def _fake_unpack(data: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


@pytest.fixture
def fake_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """pedl.config and pedl.context with the documented API and predictable behaviour."""
    config = types.ModuleType("pedl.config")
    config.ConfigError = FakeConfigError  # type: ignore[attr-defined]
    config.parse_experiment_config = _fake_parse  # type: ignore[attr-defined]
    context = types.ModuleType("pedl.context")
    context.ContextError = FakeContextError  # type: ignore[attr-defined]
    context.pack = _fake_pack  # type: ignore[attr-defined]
    context.unpack = _fake_unpack  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pedl.config", config)
    monkeypatch.setitem(sys.modules, "pedl.context", context)


@pytest.fixture
def unused_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cmd_experiment, "POLL_SECONDS", 0.0)
    monkeypatch.delenv("PEDL_MASTER", raising=False)
    monkeypatch.delenv("PEDL_HOME", raising=False)
