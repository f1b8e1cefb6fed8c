"""Expected failures become one clear line on stderr and an exit code, never a traceback."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.client.errors import ClientError

if TYPE_CHECKING:
    import grpc

# argparse also exits 2 on usage errors; bad local input (config, context) shares that code.
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


class CliError(ClientError):
    """A ClientError that also says the command's exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message, bad_input=exit_code == EXIT_BAD_INPUT)
        self.exit_code = exit_code


def exit_code(error: ClientError) -> int:
    return (
        error.exit_code
        if isinstance(error, CliError)
        else EXIT_BAD_INPUT
        if error.bad_input
        else EXIT_FAILURE
    )


def rpc_error_message(error: grpc.RpcError, master: str) -> str:
    import grpc

    code = error.code() if hasattr(error, "code") else None
    details = (error.details() if hasattr(error, "details") else None) or ""
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"cannot reach the pedl scheduler at {master} (is the cluster up? `pedl cluster up`)"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        hint = "" if "user login" in details else " (log in with `pedl user login`)"
        return f"not authenticated at {master}: {details or 'no credential'}{hint}"
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return f"permission denied: {details}"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"the pedl scheduler at {master} did not answer in time"
    if code in (
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ):
        return details or code.name.lower().replace("_", " ")
    name = code.name if code is not None else "UNKNOWN"
    return f"the pedl scheduler at {master} failed: {name}: {details or 'no details'}"
