"""Disk hygiene on an agent: a per-trial disk limit, and trial directories that do not pile up.

A trial writes only inside its own directory (the sandbox binds it, with /tmp inside it) and its own
/dev/shm (a directory of the machine's, in RAM), so polling what both hold bounds what it can fill
(the limit sizes its /dev/shm too); a quota mechanism would need root and a filesystem that has one,
which bubblewrap alone does not give. A run's directory goes when the run
ends; after a failure it stays `--keep-failed-trial-dirs` long for debugging (a marker file holds the
time it may go), and a sweep removes what is due, also what a crashed agent left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import structlog

# The file in a kept trial directory holding the time (epoch seconds) after which it is removed.
REMOVE_AFTER = ".pedl-remove-after"
DEFAULT_POLL_SECONDS = 2.0
DEFAULT_KEEP_FAILED = "24h"
SWEEP_SECONDS = 60.0

_SIZE = re.compile(r"(?i)^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$")
_DURATION = re.compile(r"(?i)^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_size(text: str) -> int:
    """`20G`, `512M`, `1.5GiB`, `4096` (bytes; binary units); `0` means no limit."""
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a size such as 20G, 512M or 4096 (bytes)")
    return int(float(m[1]) * _UNITS[m[2].lower()])


def parse_duration(text: str) -> float:
    """`24h`, `30m`, `90s`, `2d` or plain seconds."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a duration such as 24h, 30m, 90s or 2d")
    return float(m[1]) * _SECONDS[m[2].lower()]


def format_size(n: int) -> str:
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def usage_bytes(root: Path) -> int:
    """Bytes allocated under `root`: a sparse file counts what it holds, a hardlinked file once,
    symlinks are not followed (their targets lie outside or are counted where they are)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [str(root)]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
                if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def remove_tree(path: Path) -> None:
    """Removes `path` whatever a trial did to its permissions (a directory it made unreadable)."""

    def retry(func: Callable[..., object], p: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
            func(p)

    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, onerror=retry)
        if path.exists():  # a directory emptied only after its modes were fixed
            shutil.rmtree(path, ignore_errors=True)


async def watch_usage(
    trial_dir: Path | Collection[Path],
    limit: int,
    on_over: Callable[[int], None],
    poll_seconds: float = DEFAULT_POLL_SECONDS,
) -> None:
    """Calls `on_over(used)` once the directory (or the directories together: a run's own and its
    /dev/shm) holds more than `limit` bytes, then returns."""
    roots = [trial_dir] if isinstance(trial_dir, Path) else list(trial_dir)
    while True:
        used = await asyncio.to_thread(lambda: sum(usage_bytes(root) for root in roots))
        if used > limit:
            on_over(used)
            return
        await asyncio.sleep(poll_seconds)


def over_limit_message(used: int, limit: int) -> str:
    return (
        f"the trial wrote {format_size(used)} into its directory and /dev/shm, over this agent's per-trial "
        "disk limit "
        f"of {format_size(limit)} (pedl-agent --trial-disk-limit); the run was killed and its files removed"
    )


@dataclass
class TrialDirs:
    """Removes trial run directories when their runs end, keeping failed ones `keep_failed` seconds."""

    root: Path  # <work dir>/trials
    keep_failed: float = parse_duration(DEFAULT_KEEP_FAILED)
    keep_all: float = 0.0  # --keep-trial-dirs: every run's directory, for debugging

    def finish(self, trial_dir: Path, failed: bool, now: float | None = None) -> None:
        keep = max(self.keep_all, self.keep_failed if failed else 0.0)
        if keep <= 0:
            remove_tree(trial_dir)
            return
        with contextlib.suppress(OSError):
            (trial_dir / REMOVE_AFTER).write_text(f"{(time.time() if now is None else now) + keep:.0f}\n")

    def sweep(self, active: Collection[Path], now: float | None = None) -> list[Path]:
        """Removes kept directories whose time has come. One without a marker and without a live run
        (its agent crashed) is kept as a failed one from now."""
        now = time.time() if now is None else now
        removed = []
        live = {p.resolve() for p in active}
        with contextlib.suppress(FileNotFoundError):
            for path in sorted(self.root.iterdir()):
                if not path.is_dir() or path.is_symlink() or path.resolve() in live:
                    continue
                marker = path / REMOVE_AFTER
                try:
                    due = float(marker.read_text().strip())
                except (OSError, ValueError):
                    self.finish(path, failed=True, now=now)
                    if path.exists():
                        continue
                    due = now
                if due <= now:
                    remove_tree(path)
                    removed.append(path)
        return removed

    async def sweep_forever(
        self, active: Callable[[], Collection[Path]], every: float = SWEEP_SECONDS
    ) -> None:
        log = structlog.get_logger()
        while True:
            try:
                removed = await asyncio.to_thread(self.sweep, active())
                if removed:
                    log.info("removed kept trial directories", count=len(removed))
            except Exception:
                log.exception("sweeping trial directories failed")
            await asyncio.sleep(every)
