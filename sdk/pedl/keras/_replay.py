"""Started Python generators as Keras data, resumed by deterministic replay.

A started generator (or any iterator) cannot be rewound or positioned, so a resumed trial gets
its data back by replay: the harness re-runs the model definition under the same seeds, which
makes a fresh generator in the state the first run's was, and draws (without training on them)
as many batches as the first run had drawn, in the same order between the training and the
validation generator. Each checkpoint stores that order (`ReplayLog`) and a fingerprint (hash
of the shapes and bytes) of each generator's next batch; after the replay the fingerprints are
compared, so a generator that is not deterministic under the trial seed is found and reported by
name (`reproducibility.replay_mismatch`: `fail`, the default, or `warn`) instead of silently
training on different data.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from pedl import _log, _trial_context

MISMATCH_OPTION = "reproducibility.replay_mismatch"


def is_started_generator(value: Any) -> bool:
    """A generator object or iterator: something read once, which `iter()` does not restart."""
    return inspect.isgenerator(value) or (
        isinstance(value, Iterator) and not hasattr(value, "__len__") and not hasattr(value, "__getitem__")
    )


def describe_generator(value: Any) -> str:
    """`generator batches (data.py:12)`, or the iterator's type."""
    code = getattr(value, "gi_code", None)
    if code is not None:
        where = f"{Path(code.co_filename).name}:{code.co_firstlineno}"
        return f"generator {value.__qualname__} ({where})"
    return f"iterator {type(value).__module__}.{type(value).__qualname__}"


def fingerprint(batch: Any) -> str:
    """A hash of the shapes, dtypes and bytes of every array in a batch."""
    digest = hashlib.sha256()
    for leaf in tf.nest.flatten(batch):
        array = np.asarray(leaf)
        digest.update(f"{array.dtype.str}{array.shape};".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:32]


class ReplayLog:
    """The order in which the generators of one trial were drawn: runs of [role, count]."""

    def __init__(self) -> None:
        self.runs: list[list[Any]] = []

    def record(self, role: str) -> None:
        if self.runs and self.runs[-1][0] == role:
            self.runs[-1][1] += 1
        else:
            self.runs.append([role, 1])


class Replayed:
    """One started generator; `role` names it in the log ("training", "validation")."""

    def __init__(
        self, iterator: Any, role: str, where: str, log: ReplayLog, steps: int | None = None
    ) -> None:
        self.iterator = iterator
        self.role = role
        self.name = f"{describe_generator(iterator)} passed as the {role} data at {where}"
        self.log = log
        self.steps = steps  # steps_per_epoch / validation_steps, when given
        self.drawn = 0
        self._pending: list[Any] = []

    def _draw(self) -> Any:
        try:
            item = next(self.iterator)
        except StopIteration:
            raise RuntimeError(
                f"the {self.name} ran out after {self.drawn} batches; PEDL trains as many batches as the "
                "searcher asks, so the generator must be endless (loop over epochs inside it)"
            ) from None
        self.drawn += 1
        self.log.record(self.role)
        return item

    def next(self) -> Any:
        return self._pending.pop(0) if self._pending else self._draw()

    def peek(self) -> Any:
        if not self._pending:
            self._pending.append(self._draw())
        return self._pending[0]

    def take(self, n: int) -> list[Any]:
        return [self.next() for _ in range(n)]

    def state(self) -> dict[str, Any]:
        """Position for a checkpoint; peeks the next batch for its fingerprint."""
        try:
            mark: str | None = fingerprint(self.peek())
        except RuntimeError:  # ran out: nothing comes next
            mark = None
        return {"drawn": self.drawn, "pending": len(self._pending), "fingerprint": mark}


def replayed_sources(training: Any, validation: Any) -> dict[str, Replayed]:
    return {
        role: source
        for role, source in (("training", training), ("validation", validation))
        if isinstance(source, Replayed)
    }


def save_state(sources: dict[str, Replayed]) -> dict[str, Any]:
    """The checkpoint's record of the replayed sources (their next batches are drawn first: the
    log must count those draws too)."""
    positions = {role: source.state() for role, source in sources.items()}
    log = next(iter(sources.values())).log
    return {"log": [list(run) for run in log.runs], "sources": positions}


def restore(sources: dict[str, Replayed], state: dict[str, Any], checkpoint: Path) -> None:
    """Redraws the checkpoint's batches in their order, keeping each source's pending batches,
    then checks each next batch against its fingerprint."""
    saved = state["sources"]
    missing = set(saved) ^ set(sources)
    if missing:
        raise ValueError(
            f"{checkpoint}: the checkpoint was taken with generators as {sorted(saved)} data, the model "
            f"definition now gives them as {sorted(sources)}"
        )
    # Batches this process drew already (a distributed trial samples one as it builds) were the
    # first draws of the first run too: they stand for the log's first entries.
    held = {role: list(source._pending) for role, source in sources.items()}
    for source in sources.values():
        source._pending = []
    drawn: dict[str, list[Any]] = {role: [] for role in sources}
    for role, count in state["log"]:
        source = sources[role]
        for _ in range(int(count)):
            drawn[role].append(held[role].pop(0) if held[role] else source._draw())
            drawn[role] = drawn[role][-max(1, int(saved[role]["pending"])) :]
    for role, source in sources.items():
        pending = int(saved[role]["pending"])
        source._pending = drawn[role][-pending:] if pending else []
        expected = saved[role]["fingerprint"]
        if expected is None:
            continue
        try:
            actual = fingerprint(source.peek())
        except RuntimeError:
            actual = None
        if actual != expected:
            _mismatch(source, int(saved[role]["drawn"]) - pending)


def _mismatch(source: Replayed, skipped: int) -> None:
    policy = _trial_context.replay_mismatch()
    message = (
        f"the {source.name} is not deterministic under the trial seed: after replaying the {skipped} "
        "batches trained before the checkpoint, its next batch differs from the one the checkpoint "
        "recorded, so the resumed trial would train on different data"
    )
    if policy == "warn":
        _log.get_logger(component="harness").warning(
            message + f" (continuing, as {MISMATCH_OPTION} is 'warn')", generator=source.name
        )
        return
    raise RuntimeError(
        f"{message}; seed every random source the generator uses from the trial seed (NumPy, random, "
        f"TensorFlow are seeded by PEDL), or set {MISMATCH_OPTION}: warn to continue on the new data"
    )
