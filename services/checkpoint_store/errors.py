"""Errors of the store's logic, each mapped to one gRPC status by the servicer."""

from __future__ import annotations


class StoreError(Exception):
    """Base of the errors the store reports to its callers."""


class InvalidArgument(StoreError):
    pass


class NotFound(StoreError):
    pass


class DataLoss(StoreError):
    """A visible checkpoint's bytes are missing or unreadable in storage."""
