"""How a Core API script reaches whoever serves it: the harness on a cluster, or this process alone.

On a cluster the harness that started the script serves the Core API on a Unix socket
(`PEDL_CORE_API_SOCKET`; gRPC, CoreApiService in protos/pedl/v1/core_api.proto): metrics,
checkpoints and preemption go through the harness's one connection to its agent, so a script's
trial is recorded, checkpointed, paused and resumed exactly as a Trial class's is. Off cluster,
`LocalLink` answers the same calls in-process ("dummy mode").
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any, Protocol

SOCKET_ENV = "PEDL_CORE_API_SOCKET"
KEY_ENV = "PEDL_CORE_API_KEY"

logger = logging.getLogger("determined.core")


class CoreApiError(RuntimeError):
    """The harness refused a Core API call; its message says why."""


class Link(Protocol):
    def call(self, method: str, **kwargs: Any) -> Any: ...

    def close(self) -> None: ...


class HarnessLink:
    """Calls the harness's CoreApiService over its socket (threads of the script may share it)."""

    def __init__(self, address: str, key: bytes) -> None:
        import grpc

        from pedl import _grpc
        from pedl.harness import core_api_wire

        self._grpc = grpc
        self._wire = core_api_wire
        limits = [
            ("grpc.max_send_message_length", _grpc.MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", _grpc.MAX_MESSAGE_BYTES),
        ]
        self._channel = grpc.insecure_channel(f"unix:{address}", options=limits)
        self._metadata = ((core_api_wire.KEY_METADATA, key.hex()),)
        self._lock = threading.Lock()
        self._calls: dict[str, Any] = {}

    def _rpc(self, rpc: str) -> Any:
        with self._lock:
            if rpc not in self._calls:
                self._calls[rpc] = self._channel.unary_unary(
                    f"/{self._wire.SERVICE.full_name}/{rpc}",
                    request_serializer=lambda message: message.SerializeToString(),
                    response_deserializer=self._wire.response_class(rpc).FromString,
                )
            return self._calls[rpc]

    def call(self, method: str, **kwargs: Any) -> Any:
        rpc = self._wire.RPCS.get(method)
        if rpc is None:
            raise CoreApiError(f"unknown Core API call {method!r}")
        request = self._wire.encode_request(rpc, kwargs)
        try:
            response = self._rpc(rpc)(request, metadata=self._metadata, wait_for_ready=True)
        except self._grpc.RpcError as e:
            raise CoreApiError(e.details() or str(e.code())) from None
        return self._wire.decode_response(response)

    def close(self) -> None:
        self._channel.close()


def harness_link() -> HarnessLink | None:
    """The link to the harness when this process runs as a trial, else None."""
    address = os.environ.get(SOCKET_ENV)
    if not address:
        return None
    return HarnessLink(address, bytes.fromhex(os.environ.get(KEY_ENV, "")))


def default_local_storage() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "determined" / "checkpoints"


def local_storage_path(checkpoint_storage: str | os.PathLike[str] | dict[str, Any] | None) -> Path:
    """Where dummy mode keeps checkpoints: a path, or a shared_fs mapping as in an experiment config."""
    if checkpoint_storage is None:
        return default_local_storage()
    if isinstance(checkpoint_storage, dict):
        kind = checkpoint_storage.get("type")
        if kind != "shared_fs" or "host_path" not in checkpoint_storage:
            raise ValueError(
                "checkpoint_storage for det.core.init() off cluster must be a path or "
                f"{{type: shared_fs, host_path: ...}}, got {checkpoint_storage!r}"
            )
        return Path(checkpoint_storage["host_path"]) / str(checkpoint_storage.get("storage_path") or "")
    return Path(checkpoint_storage)


class LocalLink:
    """Dummy mode: metrics are logged, checkpoints live under a local directory, nothing preempts."""

    def __init__(self, storage: Path) -> None:
        self.storage = storage

    def call(self, method: str, **kwargs: Any) -> Any:
        return getattr(self, f"_{method}")(**kwargs)

    def close(self) -> None:
        pass

    def _report(self, group: str, steps_completed: int, metrics: dict[str, Any]) -> None:
        logger.info("%s metrics at steps_completed=%d: %s", group, steps_completed, metrics)

    def _tensorboard_manual(self) -> None:
        pass

    def _tensorboard_upload(self, files: list[list[str]]) -> None:
        logger.info("TensorBoard files left in place (no cluster to upload to): %d", len(files))

    def _progress(self, progress: float) -> None:
        logger.info("progress: %.1f%%", progress * 100)

    def _early_exit(self, reason: str) -> None:
        logger.info("early exit: %s", reason)

    def _checkpoint_begin(self) -> dict[str, str]:
        storage_id = str(uuid.uuid4())
        path = self.storage / storage_id
        path.mkdir(parents=True)
        return {"storage_id": storage_id, "path": str(path)}

    def _checkpoint_commit(self, storage_id: str, path: str, metadata: dict[str, Any]) -> str:
        (Path(path) / "metadata.json").write_text(json.dumps(metadata, sort_keys=True))
        return storage_id

    def _checkpoint_abort(self, storage_id: str, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def _checkpoint_upload(self, source: str, metadata: dict[str, Any]) -> str:
        begun = self._checkpoint_begin()
        shutil.copytree(source, begun["path"], dirs_exist_ok=True)
        return self._checkpoint_commit(begun["storage_id"], begun["path"], metadata)

    def _checkpoint_download(self, storage_id: str, dest: str) -> None:
        shutil.copytree(self._existing(storage_id), dest, dirs_exist_ok=True)

    def _checkpoint_metadata(self, storage_id: str) -> dict[str, Any]:
        file = self._existing(storage_id) / "metadata.json"
        return json.loads(file.read_text()) if file.is_file() else {}

    def _checkpoint_delete(self, storage_id: str) -> None:
        shutil.rmtree(self._existing(storage_id))

    def _existing(self, storage_id: str) -> Path:
        path = self.storage / storage_id
        if not storage_id or not path.is_dir():
            raise CoreApiError(f"no checkpoint {storage_id!r} in {self.storage}")
        return path

    def _should_preempt(self) -> bool:
        return False

    def _acknowledge_preemption(self) -> None:
        pass

    def _operation_progress(self, length: float) -> None:
        logger.info("searcher operation progress: %s", length)

    def _operation_completed(self, length: int, searcher_metric: float) -> None:
        logger.info("searcher operation of length %d completed: %s", length, searcher_metric)
