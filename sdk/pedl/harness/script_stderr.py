"""A Core API script's stderr, passed through to the harness's as it comes, with its tail kept: when
the script exits with an error, the trial's error names the exception the script died of (and where
in the model definition), not only its exit code; the traceback stays in the trial's log.

Passed through in chunks as read (not lines): progress bars that redraw with `\\r` show as before."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import IO

_TAIL_BYTES = 64 * 1024
# The last line of a Python traceback: `NameError: name 'x' is not defined`, `pkg.mod.Error: ...`.
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?$")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')


class StderrTail:
    """Copies a child's stderr pipe to this process's stderr on a thread, keeping its last bytes."""

    def __init__(self, pipe: IO[bytes], model_dir: Path, target_fd: int = 2) -> None:
        self._pipe = pipe
        self._model_dir = model_dir.resolve()
        self._fd = target_fd
        self._tail = bytearray()
        self._thread = threading.Thread(target=self._copy, name="script-stderr", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        fd = self._pipe.fileno()
        while chunk := os.read(fd, 65536):
            view = memoryview(chunk)
            while view:
                try:
                    view = view[os.write(self._fd, view) :]
                except OSError:  # the harness's stderr is gone: keep the tail all the same
                    break
            self._tail += chunk
            del self._tail[:-_TAIL_BYTES]
        self._pipe.close()

    def join(self, timeout: float) -> None:
        """Waits until the child's stderr is closed, or `timeout` seconds (a process the script left
        behind may hold it open)."""
        self._thread.join(timeout)

    def exception_line(self) -> str:
        """The exception the script died of, as its traceback's last line says, with the model
        definition's innermost frame ("NameError: name 'pathlib' is not defined (at
        model_def.py:112)"); "" when its stderr ends in no traceback."""
        return exception_line(self._tail.decode("utf-8", errors="replace"), self._model_dir)


def exception_line(text: str, model_dir: Path) -> str:
    """The last traceback's exception line in `text`, with its innermost frame under `model_dir`."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return ""
    block = lines[starts[-1] :]
    ends = [line.strip() for line in block if _EXCEPTION.match(line.strip())]
    if not ends:
        return ""
    where = ""
    for line in block:
        frame = _FRAME.match(line)
        if frame is None or frame["file"].startswith("<"):  # `<string>`, `<frozen runpy>`: no file
            continue
        path = (model_dir / frame["file"]).resolve()  # a relative one is the working directory's
        if path.is_relative_to(model_dir):
            where = f" (at {path.relative_to(model_dir)}:{frame['line']})"
    return f"{ends[-1]}{where}"
