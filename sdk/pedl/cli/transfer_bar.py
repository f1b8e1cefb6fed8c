"""Progress lines for uploads and downloads, drawn on stderr only when stdout is a terminal
(scripts and pipes get the plain one-line results and nothing else)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pedl.cli import render

_WIDTH = 30


def enabled() -> bool:
    return sys.stdout.isatty() and sys.stderr.isatty()


def bar_line(label: str, done: int, total: int, elapsed: float) -> str:
    """`label [#####.....]  42%  1.2 MB / 3.0 MB  3 s` (pure, for tests)."""
    fraction = min(1.0, done / total) if total > 0 else 0.0
    filled = int(fraction * _WIDTH)
    bar = "#" * filled + "." * (_WIDTH - filled)
    sizes = f"{render.human_bytes(done)} / {render.human_bytes(total)}"
    return f"{label} [{bar}] {fraction * 100:3.0f}%  {sizes}  {elapsed:.0f} s"


def _directory_bytes(parent: Path, prefix: str) -> int:
    total = 0
    for staging in parent.glob(prefix + "*"):
        for root, _, files in os.walk(staging):
            for name in files:
                try:
                    total += os.path.getsize(os.path.join(root, name))
                except OSError:
                    pass
    return total


@contextmanager
def _ticker(draw: Callable[[float], str]) -> Iterator[None]:
    if not enabled():
        yield
        return
    stop = threading.Event()
    start = time.monotonic()

    def loop() -> None:
        while not stop.wait(0.2):
            sys.stderr.write("\r" + draw(time.monotonic() - start) + "\033[K")
            sys.stderr.flush()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()


@contextmanager
def download(label: str, target: Path, total: int) -> Iterator[None]:
    """A bar over the bytes landing in the checkpoint client's staging directory next to `target`."""
    parent, prefix = target.parent, f".{target.name}.download-"
    with _ticker(lambda elapsed: bar_line(label, _directory_bytes(parent, prefix), total, elapsed)):
        yield


@contextmanager
def upload(label: str, size: int) -> Iterator[Callable[[int], None]]:
    """A bar over the bytes sent so far: the caller reports each part through the function it gets."""
    sent = [0]

    def advance(count: int) -> None:
        sent[0] += count

    with _ticker(lambda elapsed: bar_line(label, sent[0], size, elapsed)):
        yield advance
