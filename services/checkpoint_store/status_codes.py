"""The gRPC status each store failure is answered with (shared by the store's servicers)."""

from __future__ import annotations

import grpc

from pedl_checkpoint_store.errors import DataLoss, InvalidArgument, NotFound, StoreError

_CODES: list[tuple[type[StoreError], grpc.StatusCode]] = [
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (DataLoss, grpc.StatusCode.DATA_LOSS),
]


def status_code(error: StoreError) -> grpc.StatusCode:
    for cls, code in _CODES:
        if isinstance(error, cls):
            return code
    return grpc.StatusCode.FAILED_PRECONDITION


def storage_failure_code(error: OSError) -> grpc.StatusCode:
    """UNAVAILABLE when storage was unreachable or failing for now (the caller may retry: a harness
    then waits for storage instead of spending the trial's restarts), else INTERNAL."""
    return grpc.StatusCode.UNAVAILABLE if getattr(error, "transient", False) else grpc.StatusCode.INTERNAL
