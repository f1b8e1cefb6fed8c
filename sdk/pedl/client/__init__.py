"""Talking to the scheduler from a user's side (the CLI, the SDK, the web UI): where it is and the one
error type its failures become. Importing this package loads no gRPC."""

from pedl.client.address import DEFAULT_MASTER, resolve_master
from pedl.client.errors import ClientError

__all__ = ["DEFAULT_MASTER", "ClientError", "resolve_master"]
