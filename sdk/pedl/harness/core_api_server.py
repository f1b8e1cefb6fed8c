"""The harness's Unix socket on which a command entrypoint's `determined.core` makes its calls.

One small request/response protocol (Python's `multiprocessing.connection`, authenticated with a
key only the script's environment holds): `(method, kwargs)` in, `("ok", value)` or
`("error", message)` out. Each connection is served by a thread of its own, so a script's threads
(or its ranks' links) never wait on one another's calls.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import Any

from pedl import _log
from pedl.harness.store_retry import StoreUnavailable


class CoreApiServer:
    def __init__(self, socket_path: Path, handlers: Mapping[str, Callable[..., Any]]) -> None:
        self.socket_path = socket_path
        self.key = secrets.token_bytes(32)
        self._handlers = handlers
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        self._listener = Listener(str(socket_path), family="AF_UNIX", authkey=self.key)
        self._closed = False
        # Set when a call failed because the checkpoint store stayed unreachable: if the script then
        # fails, that is why (the harness exits as an infrastructure failure, not the script's).
        self.store_unavailable: StoreUnavailable | None = None
        self._log = _log.get_logger(component="harness")
        threading.Thread(target=self._accept, name="core-api-accept", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn = self._listener.accept()
            except Exception:  # closed, or a client that failed authentication
                if self._closed:
                    return
                continue
            threading.Thread(target=self._serve, args=(conn,), name="core-api", daemon=True).start()

    def _serve(self, conn: Connection) -> None:
        with conn:
            while True:
                try:
                    method, kwargs = conn.recv()
                except (EOFError, OSError):
                    return
                conn.send(self.answer(method, kwargs))

    def answer(self, method: str, kwargs: dict[str, Any]) -> tuple[str, Any]:
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
        self._closed = True
        self._listener.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
