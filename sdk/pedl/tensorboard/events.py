"""Writing scalar summaries to a TensorBoard event file with tensorboard's own TF-free writer."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

# Marks the files pedl writes, so a refresh may delete its own files and nobody else's.
SUFFIX = ".pedl"


def scalars(metrics: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """(tag, value) of every number in `metrics`; nested dicts become `outer/inner` tags.

    Booleans, strings and lists are left out: TensorBoard scalars are numbers. NaN and
    infinities are kept, as TensorBoard shows them.
    """
    for key, value in metrics.items():
        tag = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from scalars(value, f"{tag}/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield tag, float(value)


class ScalarEventWriter:
    """One TensorBoard run directory; events are buffered until `flush()`."""

    def __init__(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir = run_dir
        # flush_secs is long: the caller flushes after each batch of events it writes.
        self._writer = EventFileWriter(
            str(run_dir), max_queue_size=1000, flush_secs=3600, filename_suffix=SUFFIX
        )

    def add(self, step: int, metrics: Mapping[str, Any], wall_time: float) -> int:
        """Writes the numbers of `metrics` at `step`; returns how many scalars were written."""
        values = [Summary.Value(tag=tag, simple_value=value) for tag, value in scalars(metrics)]
        if values:
            self._writer.add_event(Event(wall_time=wall_time, step=step, summary=Summary(value=values)))
        return len(values)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def remove_pedl_event_files(directory: Path) -> None:
    """Deletes the event files pedl wrote under `directory` (before rewriting them from scratch)."""
    if directory.is_dir():
        for path in directory.rglob(f"events.out.tfevents.*{SUFFIX}"):
            path.unlink()
