"""The one exception family checkpoint clients see, whatever failed (network, server, disk, data)."""

from __future__ import annotations

import grpc


class CheckpointError(Exception):
    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


class CheckpointNotFound(CheckpointError):
    pass
