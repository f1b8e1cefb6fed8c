"""Logging a client in: exchange a password for a session token and remember it in auth.json."""

from __future__ import annotations

from pathlib import Path

from pedl import _grpc, auth
from pedl.auth import client_identity
from pedl.v1 import auth_pb2, auth_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc

TIMEOUT_SECONDS = 30.0


def login(master: str, username: str, password: str, auth_path: Path | None = None) -> auth_pb2.LoginResponse:
    """Raises grpc.RpcError (UNAUTHENTICATED for a wrong password). The saved entry also names the
    cluster's checkpoint store, so clients present the token there too."""
    with _grpc.channel(master) as ch:
        reply = auth_pb2_grpc.AuthServiceStub(ch).Login(
            auth_pb2.LoginRequest(username=username, password=password),
            timeout=TIMEOUT_SECONDS,
            metadata=client_identity.metadata(),
        )
    with _grpc.channel(master, token=reply.token) as ch:
        info = scheduler_pb2_grpc.SchedulerServiceStub(ch).GetClusterInfo(
            scheduler_pb2.GetClusterInfoRequest(), timeout=TIMEOUT_SECONDS
        )
    entry = {
        "username": reply.user.username,
        "token": reply.token,
        "expires_at": reply.expires_at,
        "checkpoint_store": info.checkpoint_store_address,
    }
    auth.save_login(master, entry, auth_path)
    return reply
