"""Round-robin sharding of a stream among a trial's ranks, shared by the PyTorch and Keras paths."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def round_robin(items: Iterable[T], count: int, index: int, pad: bool) -> Iterator[T]:
    """Items `index, index + count, ...`, for a stream whose length is known only at its end.

    With `pad`, a short last round is filled with the stream's first items so that every rank
    yields the same number (ranks stepping together must never wait on one that ran out).
    """
    first: list[Any] = []
    round_: list[Any] = []
    for item in items:
        if len(first) < count:
            first.append(item)
        round_.append(item)
        if len(round_) == count:
            yield round_[index]
            round_ = []
    if not round_:
        return
    if index < len(round_):
        yield round_[index]
    elif pad:
        yield first[(index - len(round_)) % len(first)]
