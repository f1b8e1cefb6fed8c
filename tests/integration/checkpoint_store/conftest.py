"""Fixtures starting a real `pedl-checkpoint-store`, on local storage or on a real SeaweedFS;
`start_checkpoint_store` is reusable elsewhere."""

from __future__ import annotations

import subprocess
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkpoint_store_process import start_checkpoint_store, stop_process
from s3_helpers import DEFAULT_BUCKET, EXPERIMENT_BUCKET, start_store

from support.processes import Service, stop
from support.seaweedfs import SeaweedFS, start_seaweedfs

__all__ = ["checkpoint_store", "start_checkpoint_store", "stop_process"]


@pytest.fixture
def checkpoint_store(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    proc, address = start_checkpoint_store(tmp_path)
    try:
        yield proc, address
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """One SeaweedFS per test module, with the default and the experiment bucket."""
    server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    try:
        server.create_bucket(DEFAULT_BUCKET)
        server.create_bucket(EXPERIMENT_BUCKET)
        yield server
    finally:
        server.kill()


@pytest.fixture
def s3_store(tmp_path: Path, weed: SeaweedFS) -> Iterator[tuple[Service, str]]:
    """A store whose default backend is S3 under a prefix of its own."""
    prefix = f"store-{uuidlib.uuid4().hex[:8]}"
    service = start_store(tmp_path, weed, prefix=prefix)
    try:
        yield service, prefix
    finally:
        stop(service.process)
