"""Fixtures starting a real `pedl-checkpoint-store`; `start_checkpoint_store` is reusable elsewhere."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkpoint_store_process import start_checkpoint_store, stop_process

__all__ = ["checkpoint_store", "start_checkpoint_store", "stop_process"]


@pytest.fixture
def checkpoint_store(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    proc, address = start_checkpoint_store(tmp_path)
    try:
        yield proc, address
    finally:
        stop_process(proc)
