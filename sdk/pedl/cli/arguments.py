"""argparse value types shared by the command modules, with messages that name the bad value."""

from __future__ import annotations

import argparse

# Ids and counts travel as protobuf int32 (the API's experiment, trial and run ids, limits); a larger
# value would fail inside the request builder with a traceback, so the parser refuses it first.
MAX_INT = 2**31 - 1


def positive_int(text: str) -> int:
    """An id or a count: 1 to MAX_INT."""
    message = f"expected a positive integer up to {MAX_INT}, got {text!r}"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(message) from None
    if not 1 <= value <= MAX_INT:
        raise argparse.ArgumentTypeError(message)
    return value


def non_negative_int(text: str) -> int:
    message = f"expected an integer from 0 to {MAX_INT}, got {text!r}"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(message) from None
    if not 0 <= value <= MAX_INT:
        raise argparse.ArgumentTypeError(message)
    return value


def port(text: str) -> int:
    value = non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535 (0 picks a free one), got {text!r}")
    return value


def metrics_port(text: str) -> int:
    """A port, 0 for a free one, or -1 for none."""
    if text.strip() == "-1":
        return -1
    try:
        return port(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a port number 0-65535 (0 picks a free one) or -1 (none), got {text!r}"
        ) from None
