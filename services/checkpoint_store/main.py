"""`pedl-checkpoint-store`: serve CheckpointStoreService until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pedl import _grpc, _log
from pedl.auth import AuthConfigError
from pedl.v1 import checkpoint_store_pb2
from pedl_checkpoint_store import security
from pedl_checkpoint_store.backends import BackendResolver
from pedl_checkpoint_store.config import Config, ConfigError, parse_config
from pedl_checkpoint_store.errors import StoreError
from pedl_checkpoint_store.local import LocalFilesystemBackend
from pedl_checkpoint_store.s3 import S3Backend
from pedl_checkpoint_store.s3_settings import S3Settings
from pedl_checkpoint_store.servicer import CheckpointStoreServicer, add_to_server
from pedl_checkpoint_store.storage import StorageBackend
from pedl_checkpoint_store.storage_roots import resolved_roots
from pedl_checkpoint_store.store import CheckpointStore
from pedl_checkpoint_store.sweeper import OrphanSweeper

SERVICE_NAME = _grpc.service_name(checkpoint_store_pb2, "CheckpointStoreService")
STOP_GRACE_SECONDS = 5.0


def write_port_file(path: Path, port: int) -> None:
    """Atomically, so a launcher polling for the file never reads it half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def default_backend(config: Config) -> StorageBackend:
    """The store's own backend, holding every checkpoint's record; raises OSError or StoreError
    (e.g. S3AccessError naming the missing bucket) when it cannot be used."""
    if config.storage == "s3":
        assert config.s3 is not None
        backend = S3Backend(S3Settings.from_config(config.s3))
        backend.check_access()
        return backend
    return LocalFilesystemBackend(config.storage_path)


async def serve(config: Config) -> None:
    log = _log.get_logger(service="checkpoint_store")
    backend = await asyncio.to_thread(default_backend, config)
    roots = resolved_roots(config.allowed_storage_roots) if config.allowed_storage_roots else None
    store = CheckpointStore(backend, BackendResolver(backend, roots, config.allowed_s3))
    report = await asyncio.to_thread(store.recover)
    log.info(
        "storage recovered",
        storage_path=str(store.catalog.describe()),
        checkpoints=report.loaded,
        removed_partial_uploads=len(report.removed_partial),
        finished_deletes=len(report.finished_deletes),
        unreadable=len(report.unreadable),
    )
    interceptors, tls, authz = security.setup(config)
    servicer = CheckpointStoreServicer(store, authz=authz)
    server, port = _grpc.aio_server(
        [lambda s: add_to_server(servicer, s)],
        [SERVICE_NAME],
        config.address,
        interceptors=interceptors,
        tls=tls,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    await _grpc.mark_serving(server)
    if config.port_file is not None:
        write_port_file(config.port_file, port)
    log.info("serving", host=config.host, port=port, auth=not config.no_auth, tls=tls is not None)
    sweep: asyncio.Task[None] | None = None
    if config.orphan_sweep_interval > 0:
        sweeper = OrphanSweeper(store, config.orphan_sweep_grace)
        sweep = asyncio.create_task(sweeper.run_forever(config.orphan_sweep_interval))
    else:
        log.warning("orphan sweep off (--orphan-sweep-interval 0): crashes may leave unrecorded bytes")
    await stop.wait()
    log.info("stopping")
    if sweep is not None:
        sweep.cancel()
    await server.stop(STOP_GRACE_SECONDS)
    log.info("stopped")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = parse_config(argv)
    except ConfigError as e:
        print(f"pedl-checkpoint-store: {e}", file=sys.stderr)
        return 2
    _log.configure_logging("checkpoint_store", config.log_level)
    try:
        asyncio.run(serve(config))
    except (OSError, StoreError, AuthConfigError) as e:
        _log.get_logger(service="checkpoint_store").error("cannot serve", error=str(e))
        print(f"pedl-checkpoint-store: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
