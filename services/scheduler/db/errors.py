"""Errors the database layer raises for conditions the caller cannot fix by changing SQL."""

from __future__ import annotations


class DatabaseUnavailable(RuntimeError):
    """The connection to the database server is gone; the statement may or may not have run.

    The failed call raises this at once instead of hanging; the next call outside a
    transaction reconnects (and raises this again while the server stays unreachable).
    """
