"""The harness's Unix socket on which a command entrypoint's `determined.core` makes its calls:
CoreApiService (protos/pedl/v1/core_api.proto), a gRPC server of the harness's own.

Each call carries the key only the script's environment holds (the socket's folder is the harness's
private temporary one as well); a call without it is refused UNAUTHENTICATED. The server's thread
pool serves calls side by side, so a script's threads (or its ranks' links) never wait on one
another's calls. `core_api_wire` maps each RPC onto the handler of the same call name.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message

from pedl import _grpc, _log
from pedl.harness import core_api_wire as wire
from pedl.harness.store_retry import StoreUnavailable

# Calls served at once: a script's threads and, on several slots, each rank's link.
_WORKERS = 32


class CoreApiServer:
    def __init__(self, socket_path: Path, handlers: Mapping[str, Callable[..., Any]]) -> None:
        self.socket_path = socket_path
        self.key = secrets.token_bytes(32)
        self._handlers = handlers
        # Set when a call failed because the checkpoint store stayed unreachable: if the script then
        # fails, that is why (the harness exits as an infrastructure failure, not the script's).
        self.store_unavailable: StoreUnavailable | None = None
        self._log = _log.get_logger(component="harness")
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        limits = [
            ("grpc.max_send_message_length", _grpc.MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", _grpc.MAX_MESSAGE_BYTES),
        ]
        self._server = grpc.server(
            ThreadPoolExecutor(_WORKERS, thread_name_prefix="core-api"), options=limits
        )
        methods = {rpc.name: self._method_handler(rpc.name) for rpc in wire.SERVICE.methods}
        self._server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler(wire.SERVICE.full_name, methods)]
        )
        if self._server.add_insecure_port(f"unix:{socket_path}") == 0:
            raise OSError(f"cannot serve the Core API on {socket_path}")
        self._server.start()

    def _method_handler(self, rpc: str) -> grpc.RpcMethodHandler:
        def serve(request: Message, context: grpc.ServicerContext) -> Message:
            sent = dict(context.invocation_metadata()).get(wire.KEY_METADATA, "")
            if not hmac.compare_digest(str(sent), self.key.hex()):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "the Core API key is missing or wrong")
            status, value = self.answer(wire.CALLS[rpc], wire.decode_request(request))
            if status != "ok":
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(value))
            return wire.encode_response(rpc, value)

        return grpc.unary_unary_rpc_method_handler(
            serve,
            request_deserializer=wire.request_class(rpc).FromString,
            response_serializer=lambda message: message.SerializeToString(),
        )

    def answer(self, method: str, kwargs: dict[str, Any]) -> tuple[str, Any]:
        """("ok", the handler's value) or ("error", why): what the script's call gets."""
        handler = self._handlers.get(method)
        if handler is None:
            return ("error", f"unknown Core API call {method!r}")
        try:
            return ("ok", handler(**kwargs))
        except StoreUnavailable as e:
            self.store_unavailable = e
            self._log.warning("core api call failed: the checkpoint store is unavailable", method=method)
            return ("error", str(e))
        except Exception as e:
            self._log.warning("core api call refused", method=method, error=str(e))
            return ("error", str(e))

    def close(self) -> None:
        self._server.stop(grace=None)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
