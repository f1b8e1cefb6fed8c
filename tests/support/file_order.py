"""Starts the slowest test files first, so two pytest-xdist workers finish together.

`scripts/test` distributes whole files (`--dist loadfile`) in collection order
(`--no-loadscope-reorder`; xdist's own reorder puts files with the most tests first, which leaves
the long one- or two-test integration files to the end, where one worker runs them while the
other idles). This plugin sorts the collection by each file's known total time (setup, call and
teardown of all its tests), longest first, keeping the tests within a file in their order; files
with no figure keep their collection order after the known ones.

The figures: `file_durations.json` beside this module (seconds per file, committed: what CI
uses) and `.cache/test-durations.json` (seconds per test, which every run updates for the tests it
ran); a file counts the larger of the two. Refresh the committed one after a full run on a quiet
machine with `python tests/support/file_order.py`.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = Path(__file__).with_name("file_durations.json")
RECORD = ROOT / ".cache" / "test-durations.json"


def _read(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))}


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def per_file(per_test: dict[str, float]) -> dict[str, float]:
    files: dict[str, float] = defaultdict(float)
    for nodeid, seconds in per_test.items():
        files[_file_of(nodeid)] += seconds
    return dict(files)


def known_durations() -> dict[str, float]:
    """Seconds per test file (its id relative to the repository, as pytest's node ids are)."""
    seed, recorded = _read(SEED), per_file(_read(RECORD))
    return {name: max(seed.get(name, 0.0), recorded.get(name, 0.0)) for name in {*seed, *recorded}}


def longest_files_first(nodeids: list[str], durations: dict[str, float]) -> list[int]:
    """The order (indices into `nodeids`) that runs the files with the most known time first."""
    first_seen: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first_seen.setdefault(_file_of(nodeid), i)

    def key(i: int) -> tuple[float, int, int]:
        name = _file_of(nodeids[i])
        return (-durations.get(name, 0.0), first_seen[name], i)

    return sorted(range(len(nodeids)), key=key)


_KEY = "pedl_file_durations"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # type: ignore[no-untyped-def]
    # xdist checks that its workers collected the same list in the same order: the controller
    # reads the figures once and hands them to each worker, so a record written meanwhile by
    # another run in this checkout cannot make their orders differ.
    node.workerinput[_KEY] = known_durations()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput = getattr(config, "workerinput", None)
    durations = workerinput.get(_KEY, {}) if workerinput is not None else known_durations()
    if not durations:
        return
    order = longest_files_first([item.nodeid for item in items], durations)
    items[:] = [items[i] for i in order]


class _Recorder:
    """Sums each test's phases as reports arrive (on xdist's controller, from all workers)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration

    def pytest_sessionfinish(self) -> None:
        if not self.seconds:
            return
        merged = {**_read(RECORD), **{k: round(v, 1) for k, v in self.seconds.items()}}
        try:
            RECORD.parent.mkdir(parents=True, exist_ok=True)
            # Per process: scripts/test's side run (mostly_waits) writes the record too.
            tmp = RECORD.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(dict(sorted(merged.items())), indent=0) + "\n")
            tmp.replace(RECORD)
        except OSError:
            pass  # a read-only checkout still runs its tests


def pytest_configure(config: pytest.Config) -> None:
    # xdist's workers report to the controller, which records for all of them.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Recorder(), "pedl-file-durations")


if __name__ == "__main__":
    # Writes the committed per-file figures from this machine's record of its last full run.
    figures = {name: round(seconds) for name, seconds in sorted(per_file(_read(RECORD)).items())}
    SEED.write_text(json.dumps(figures, indent=0) + "\n")
    print(f"wrote {SEED} from {RECORD}")
