"""Building pedl's wheel the way a release does, for tests of what an installed pedl contains."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_wheel(tmp: Path) -> tuple[Path, str]:
    """The wheel and pip's output. Builds from a copy of the sources, so no build/ or egg-info lands
    in the checkout."""
    source = tmp / "src"
    source.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("sdk", "services"):
        shutil.copytree(ROOT / folder, source / folder, ignore=ignore)
    out = tmp / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w", str(out)]
        + ["."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (wheel,) = out.glob("pedl-*.whl")
    return wheel, build.stdout + build.stderr
