"""scripts/import_graph.py, the import-circle check CI runs: it sees imports under TYPE_CHECKING and
inside functions, names modules as setup.py's mapping does, and fails naming the circle."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUP = 'ROOTS = {"pedl": "sdk/pedl", "pedl_scheduler": "services/scheduler"}\n'


def _checkout(tmp: Path, files: dict[str, str]) -> Path:
    (tmp / "setup.py").write_text(SETUP)
    for name, text in files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for package in ("sdk/pedl", "services/scheduler", "services/scheduler/experiments"):
        init = tmp / package / "__init__.py"
        if init.parent.is_dir() and not init.exists():
            init.write_text("")
    return tmp


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    script = ROOT / "scripts" / "import_graph.py"
    return subprocess.run([sys.executable, str(script), "--root", str(root)], capture_output=True, text=True)


def test_this_checkout_has_no_circle() -> None:
    done = _check(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "import circle:" not in done.stdout


def test_a_circle_closed_under_type_checking_and_in_a_function_fails_by_name(tmp_path: Path) -> None:
    root = _checkout(tmp_path, {
        # services/scheduler is imported as pedl_scheduler; the circle crosses into the SDK.
        "services/scheduler/rooms.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from pedl.client import Client
        """,
        "sdk/pedl/client.py": """
            def connect() -> None:
                from pedl_scheduler import rooms
        """,
    })  # fmt: skip
    done = _check(root)
    assert done.returncode == 1, done.stdout
    assert "import circle: pedl.client -> pedl_scheduler.rooms -> pedl.client" in done.stdout, done.stdout
    assert "pedl_scheduler.rooms: services/scheduler/rooms.py" in done.stdout


def test_relative_imports_count_and_the_experiment_core_is_not_excepted(tmp_path: Path) -> None:
    root = _checkout(tmp_path, {
        "services/scheduler/experiments/a.py": "from . import b\n",
        "services/scheduler/experiments/b.py": "from .a import thing\n",
        "sdk/pedl/one.py": "import pedl.two\n",
    })  # fmt: skip
    done = _check(root)
    assert done.returncode == 1, done.stdout
    assert "import circle: pedl_scheduler.experiments.a -> pedl_scheduler.experiments.b" in done.stdout
    (root / "services/scheduler/experiments/b.py").write_text("thing = 1\n")
    done = _check(root)
    assert done.returncode == 0, done.stdout
    (root / "sdk/pedl/two.py").write_text("from pedl import one\n")
    done = _check(root)
    assert done.returncode == 1 and "import circle: pedl.one -> pedl.two -> pedl.one" in done.stdout
