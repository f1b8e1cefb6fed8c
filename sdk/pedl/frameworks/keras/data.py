"""`pedl.frameworks.keras.data`: PEDL 0.11's KerasDataAdapter (a wrapper around a Keras Sequence) and
InMemorySequence (`in_memory.py`, imported when asked for: it needs Keras)."""

from __future__ import annotations

from typing import Any

from pedl.keras._adapter import KerasDataAdapter

__all__ = ["KerasDataAdapter"]


def __getattr__(name: str) -> Any:
    if name == "InMemorySequence":
        from pedl.frameworks.keras.in_memory import InMemorySequence

        return InMemorySequence
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
