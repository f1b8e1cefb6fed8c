"""Snapshots of every random number generator a trial's results depend on."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def capture(plain: bool = True) -> dict[str, Any]:
    """Python, NumPy, torch CPU and (if present) CUDA generator states, as plain picklable data.

    With `plain=False` the NumPy key stays the array NumPy returns (a copy): turning it into a list
    costs a third of the capture, which a snapshot that is rarely saved can defer to `as_plain`."""
    np_state: Any = np.random.get_state()  # the legacy tuple form
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np_state if not plain else (np_state[0], np_state[1].tolist(), *np_state[2:]),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def as_plain(state: dict[str, Any]) -> dict[str, Any]:
    """`state` as `capture()` gives it, from either form of `capture`."""
    name, keys, *rest = state["numpy"]
    if not isinstance(keys, np.ndarray):
        return state
    return {**state, "numpy": (name, keys.tolist(), *rest)}


def restore(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), *rest))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def loader_generators(loader: torch.utils.data.DataLoader) -> list[torch.Generator]:
    """Generators a DataLoader draws its shuffling and worker seeds from, besides the global one."""
    found: list[torch.Generator] = []
    for owner in (loader, loader.sampler, getattr(loader, "batch_sampler", None)):
        gen = getattr(owner, "generator", None)
        if isinstance(gen, torch.Generator) and all(gen is not g for g in found):
            found.append(gen)
    return found
