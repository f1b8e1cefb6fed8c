"""Checkpoint downloads from a page: the store's files as one .tar.gz, fetched as the user."""

from __future__ import annotations

import re
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from pedl.checkpoints import CheckpointStoreClient
from pedl.checkpoints.errors import CheckpointError
from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import Gateway, GatewayError

UUID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$")


@contextmanager
def fetched(gateway: Gateway, token: str, uuid: str) -> Iterator[Path]:
    """Checkpoint `uuid` downloaded (the store checks the user's token and every file's sha256) into
    a temporary directory, removed when the block ends."""
    if not UUID.match(uuid):
        raise GatewayError(404, f"checkpoint {uuid!r} not found")
    store = gateway.call(
        token, "GetClusterInfo", scheduler_pb2.GetClusterInfoRequest()
    ).checkpoint_store_address
    if not store:
        raise GatewayError(503, "the scheduler names no checkpoint store")
    scratch = Path(tempfile.mkdtemp(prefix="pedl-webui-"))
    try:
        try:
            with CheckpointStoreClient(store, token=token) as client:
                client.download(uuid, scratch / uuid)
        except CheckpointError as e:
            status = 404 if "not found" in str(e).lower() else 502
            raise GatewayError(status, str(e)) from None
        yield scratch / uuid
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def write_tar(gateway: Gateway, token: str, uuid: str, out: BinaryIO, arcname: str = "") -> None:
    """Checkpoint `uuid` written to `out` as a gzipped tar of a folder named after the uuid (or
    `arcname`: "." puts the files at the archive's top, as Determined's client extracts them)."""
    with fetched(gateway, token, uuid) as directory, tarfile.open(fileobj=out, mode="w|gz") as tar:
        tar.add(directory, arcname=arcname or uuid)


def write_file(gateway: Gateway, token: str, uuid: str, path: str, out: BinaryIO) -> None:
    """One file of checkpoint `uuid` (a path of its file list) copied to `out`."""
    with fetched(gateway, token, uuid) as directory:
        target = (directory / path).resolve()
        if directory.resolve() not in target.parents or not target.is_file():
            raise GatewayError(404, f"checkpoint {uuid} has no file {path!r}")
        with open(target, "rb") as f:
            shutil.copyfileobj(f, out)
