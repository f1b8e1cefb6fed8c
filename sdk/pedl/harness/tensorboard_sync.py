"""Uploading the event files a trial writes itself (Determined's TensorBoard writers, a Core API
script's SummaryWriter) to its experiment's checkpoint storage, through the checkpoint store.

Each run has a TensorBoard directory inside its trial directory (`get_tensorboard_path()`, and where
`determined.tensorboard`'s writers write); in the sandbox /tmp is the run's own (`<trial dir>/.tmp`),
so /tmp/tensorboard, Determined's documented logdir, is collected too. After each workload and at
exit the chief's harness sends every file that is new or has grown since it was last sent.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pedl.v1 import common_pb2

# Set in the harness's environment (and so a Core API script's): the run's TensorBoard directory.
TENSORBOARD_ENV = "PEDL_TENSORBOARD_DIR"
# Where a trial runs with no harness (a notebook, a unit test): Determined's documented logdir.
DEFAULT_DIR = Path("/tmp/tensorboard")


class _Flushable(Protocol):
    def flush(self) -> None: ...


_writers: weakref.WeakSet[Any] = weakref.WeakSet()


def register_writer(writer: _Flushable) -> None:
    """A writer the harness flushes before each upload (torch's SummaryWriter holds events for 2 minutes)."""
    _writers.add(writer)


def flush_writers() -> None:
    for writer in list(_writers):
        try:
            writer.flush()
        except Exception as e:  # a writer the trial closed, or broke: its files are as they are
            print(f"pedl.harness: could not flush a TensorBoard writer: {e}", file=sys.stderr, flush=True)


def tensorboard_dir() -> Path:
    """The run's TensorBoard directory (created), as the harness set it; else /tmp/tensorboard."""
    path = Path(os.environ.get(TENSORBOARD_ENV) or DEFAULT_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_directories(trial_dir: Path) -> list[Path]:
    """What is collected: the run's TensorBoard directory, then the sandbox's /tmp/tensorboard as the
    trial directory holds it (absent outside the sandbox, where /tmp is the machine's)."""
    return [trial_dir / "tensorboard", trial_dir / ".tmp" / "tensorboard"]


@dataclass(frozen=True)
class Pending:
    rel: str
    path: Path
    size: int
    stamp: tuple[int, int]  # (size, mtime_ns) when found


def changed_files(directories: Sequence[Path], sent: dict[str, tuple[int, int]]) -> list[Pending]:
    """Regular files under `directories` (relative paths; the first directory wins a clash) that are
    new or whose size or modification time differ from what `sent` remembers."""
    found: dict[str, Pending] = {}
    for root in directories:
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                try:
                    st = path.lstat()
                except FileNotFoundError:
                    continue
                if not path.is_file() or path.is_symlink():
                    continue
                rel = path.relative_to(root).as_posix()
                if rel not in found:
                    found[rel] = Pending(rel, path, st.st_size, (st.st_size, st.st_mtime_ns))
    return [p for rel, p in sorted(found.items()) if sent.get(rel) != p.stamp]


class TensorboardUploader:
    """Remembers what was sent; `upload(files)` stores (relative path, file, size) triples."""

    def __init__(
        self, directories: Sequence[Path], upload: Callable[[list[tuple[str, Path, int]]], Any]
    ) -> None:
        self.directories = list(directories)
        self._upload = upload
        self._sent: dict[str, tuple[int, int]] = {}
        # A Core API script in TensorboardMode.MANUAL uploads what it chooses (`upload_named`), as in
        # Determined: nothing goes up on its own then.
        self.manual = False

    def set_manual(self) -> None:
        self.manual = True

    def upload_named(self, files: list[list[str]]) -> int:
        """A script's `upload_tensorboard_files`: [local path, stored name] pairs, each file inside
        one of the run's TensorBoard directories (a script cannot send other files this way)."""
        from pedl.checkpoints.paths import validate_relpath

        chosen: list[tuple[str, Path, int]] = []
        roots = [d.resolve() for d in self.directories]
        for local, name in files:
            path = Path(local).resolve()
            if not any(path.is_relative_to(root) for root in roots):
                raise ValueError(f"upload_tensorboard_files: {local} is not inside the TensorBoard directory")
            chosen.append((validate_relpath(name), path, path.stat().st_size))
        if chosen:
            self._upload(chosen)
        return len(chosen)

    def sync(self) -> int:
        """Sends what is new or grew (nothing in manual mode); how many files were sent."""
        if self.manual:
            return 0
        flush_writers()
        pending = changed_files(self.directories, self._sent)
        if not pending:
            return 0
        self._upload([(p.rel, p.path, p.size) for p in pending])
        for p in pending:
            self._sent[p.rel] = p.stamp
        return len(pending)


class WorkloadSource(Protocol):
    def next_workload(self) -> common_pb2.Workload: ...

    def complete(self, result: common_pb2.WorkloadResult) -> None: ...


class SyncingSource:
    """A workload source whose results go out only after the trial's new event files are stored, so
    that once the scheduler has a result, TensorBoard can show what the trial wrote up to it."""

    def __init__(self, source: WorkloadSource, uploader: TensorboardUploader) -> None:
        self._source = source
        self._uploader = uploader

    def next_workload(self) -> common_pb2.Workload:
        return self._source.next_workload()

    def complete(self, result: common_pb2.WorkloadResult) -> None:
        self._uploader.sync()
        self._source.complete(result)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


def final_sync(uploader: TensorboardUploader, failing: bool) -> None:
    """At exit: what was written since the last workload. While the harness already fails, a failure
    here is only reported, so it does not hide the first one."""
    try:
        uploader.sync()
    except Exception as e:
        if not failing:
            raise
        print(f"pedl.harness: could not upload TensorBoard files: {e}", file=sys.stderr, flush=True)
