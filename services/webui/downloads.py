"""Checkpoint downloads from a page: the store's files as one .tar.gz, fetched as the user."""

from __future__ import annotations

import re
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import BinaryIO

from pedl.checkpoints import CheckpointStoreClient
from pedl.checkpoints.errors import CheckpointError
from pedl.v1 import scheduler_pb2
from pedl_webui.gateway import Gateway, GatewayError

UUID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$")


def write_tar(gateway: Gateway, token: str, uuid: str, out: BinaryIO, arcname: str = "") -> None:
    """Downloads checkpoint `uuid` (the store checks the user's token and every file's sha256) into a
    temporary directory, then writes it to `out` as a gzipped tar of a folder named after the uuid
    (or `arcname`: "." puts the files at the archive's top, as Determined's client extracts them)."""
    if not UUID.match(uuid):
        raise GatewayError(404, f"checkpoint {uuid!r} not found")
    store = gateway.call(
        token, "GetClusterInfo", scheduler_pb2.GetClusterInfoRequest()
    ).checkpoint_store_address
    if not store:
        raise GatewayError(503, "the scheduler names no checkpoint store")
    scratch = Path(tempfile.mkdtemp(prefix="pedl-webui-"))
    try:
        with CheckpointStoreClient(store, token=token) as client:
            client.download(uuid, scratch / uuid)
        with tarfile.open(fileobj=out, mode="w|gz") as tar:
            tar.add(scratch / uuid, arcname=arcname or uuid)
    except CheckpointError as e:
        status = 404 if "not found" in str(e).lower() else 502
        raise GatewayError(status, str(e)) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
