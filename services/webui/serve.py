"""Runs the app on uvicorn, with the bound port known before serving (`--port 0`, tests)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


class Server:
    """A uvicorn server on a socket bound here: `port` is known at once, `run` serves until `stop`."""

    def __init__(self, app: Any, host: str, port: int, log_level: str = "warning") -> None:
        self.socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.socket.listen(1024)
        self.port: int = self.socket.getsockname()[1]
        config = uvicorn.Config(
            app, log_level=log_level, access_log=False, lifespan="off", timeout_graceful_shutdown=3
        )
        self._server = uvicorn.Server(config)

    def run(self) -> None:
        self._server.run(sockets=[self.socket])
        self.socket.close()

    def stop(self) -> None:
        self._server.should_exit = True

    def start_thread(self) -> threading.Thread:
        """Serves on a daemon thread (tests); returns once the server accepts connections."""
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        while not self._server.started and thread.is_alive():
            time.sleep(0.02)
        return thread
