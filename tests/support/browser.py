"""Headless Chromium for browser tests: Debian's `chromium` (scripts/setup-env installs it) driven by
Playwright for Python. Playwright's own browser download needs the internet, so it is never used.

Screenshots go to $PEDL_TEST_ARTIFACTS (default: test-artifacts/ at the repository root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if found:
            return found
    return None


def artifacts_dir(*parts: str) -> Path:
    path = Path(os.environ.get("PEDL_TEST_ARTIFACTS") or ROOT / "test-artifacts").joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def chromium() -> Iterator[Any]:
    """A Playwright Browser on Debian's chromium; skips (naming why) only where none can be had."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright for Python is not installed (pip install -e '.[test]')")
    executable = chromium_path()
    if executable is None:
        pytest.skip("no chromium executable: scripts/setup-env installs it with apt-get (needs root and apt)")
    probe = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"{executable} does not run here: {probe.stderr.strip()[:200]}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def wait_for(predicate: Callable[[], Any], timeout: float = 240, what: str = "") -> None:
    """Until `predicate()` is true (a page filled by the browser's own polling), else fail naming `what`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)
