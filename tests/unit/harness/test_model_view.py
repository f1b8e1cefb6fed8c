"""A forked harness's model directory is a copy-on-write view of the agent's shared tree: what the run
writes, rewrites in place, deletes or renames there stays in its own upper directory; where no overlay
can be mounted it gets a copy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pedl.harness import _model_view, _namespaces
from pedl.harness._model_view import ModelView

# Run in a child process: mounts stay in its own mount namespace, and it may enter a user namespace.
CHILD = r"""
import errno, json, os, shutil, sys
from pathlib import Path
from pedl.harness import _model_view

view = _model_view.ModelView.from_dict(json.loads(sys.argv[1]))
copied = _model_view.show_alone(view)
here = Path(view.target)
seen = (here / "shipped.txt").read_text()
(here / "new.txt").write_text("mine\n")
with open(here / "shipped.txt", "r+") as f:
    f.truncate(0)
    f.write("rewritten\n")
(here / "doomed.txt").unlink()
try:
    os.rename(here / "pkg", here / "moved")
    renamed = "in place"
except OSError as e:  # EXDEV in a user namespace's overlay (no redirect_dir there)
    if e.errno != errno.EXDEV:
        raise
    shutil.move(here / "pkg", here / "moved")
    renamed = "moved"
(here / "moved" / "deep.txt").unlink()
os.rmdir(here / "moved")
after = sorted(os.listdir(here))
print(json.dumps({"copied": copied, "seen": seen, "after": after, "renamed": renamed}))
"""


def _tree(root: Path) -> Path:
    tree = root / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "shipped.txt").write_text("shipped\n")
    (tree / "doomed.txt").write_text("doomed\n")
    (tree / "pkg" / "deep.txt").write_text("deep\n")
    return tree


def _view(root: Path) -> ModelView:
    trial = root / "trials" / "1-1"
    return ModelView(str(root / "tree"), str(trial / "model"), str(trial / "up"), str(trial / "work"))


def _python(user: list[str], *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([*user, sys.executable, *argv], capture_output=True, text=True, timeout=60, env=env)


def _run_child(view: ModelView, user: list[str]) -> dict:
    done = _python(user, "-c", CHILD, json.dumps(view.__dict__))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _check(root: Path, result: dict) -> None:
    assert result["seen"] == "shipped\n"
    assert result["after"] == ["new.txt", "shipped.txt"]
    tree = root / "tree"  # untouched
    assert (tree / "shipped.txt").read_text() == "shipped\n"
    assert (tree / "doomed.txt").exists() and (tree / "pkg" / "deep.txt").exists()
    assert not (tree / "new.txt").exists() and not (tree / "moved").exists()


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """Under /tmp, traversable by another user (pytest's tmp_path is private to this one)."""
    root = Path(tempfile.mkdtemp(prefix="pedl-view-test-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)


def test_the_overlay_keeps_every_change_of_the_run_to_itself(shared_root: Path) -> None:
    why = _model_view.probe(sandboxed=False)
    if why:
        pytest.skip(f"no overlay can be mounted here: {why}")
    _tree(shared_root)
    view = _view(shared_root)
    result = _run_child(view, [])
    assert result["copied"] == "" and result["renamed"] == "in place"
    _check(shared_root, result)
    assert (Path(view.upper) / "new.txt").read_text() == "mine\n"  # the run's changes, kept apart
    assert (Path(view.upper) / "shipped.txt").read_text() == "rewritten\n"


def test_without_privileges_the_overlay_is_mounted_in_a_user_namespace(shared_root: Path) -> None:
    """A non-root agent's forked harness: its own user namespace, where overlayfs needs `userxattr`
    (without it, renaming or removing a shipped directory fails)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to run the child as another user (setpriv)")
    _tree(shared_root)
    for path in [shared_root, *shared_root.rglob("*")]:
        os.chown(path, 65534, 65534)
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = _python(user, "-c", "from pedl.harness import _model_view as m; print(m.probe(False))")
    if probe.returncode != 0 or probe.stdout.strip():
        pytest.skip(f"no unprivileged overlay here: {probe.stdout}{probe.stderr}")
    result = _run_child(_view(shared_root), user)
    assert result["copied"] == ""
    _check(shared_root, result)


def test_where_no_overlay_can_be_mounted_the_run_gets_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OSError(1, "mount overlay: Operation not permitted")

    monkeypatch.setattr(_namespaces, "mount", refuse)  # as on a kernel without unprivileged overlayfs
    _tree(tmp_path)
    view = _view(tmp_path)
    Path(view.target).mkdir(parents=True)
    assert "Operation not permitted" in _model_view.show(view)
    (Path(view.target) / "shipped.txt").write_text("rewritten\n")
    assert (tmp_path / "tree" / "shipped.txt").read_text() == "shipped\n"
    assert (Path(view.target) / "pkg" / "deep.txt").read_text() == "deep\n"


def test_paths_with_commas_and_colons_are_escaped_in_the_overlay_options() -> None:
    options = _model_view.overlay_options("/w/a,b", "/w/c:d", "/w/e\\f", user_namespace=True)
    assert options == "lowerdir=/w/a\\,b,upperdir=/w/c\\:d,workdir=/w/e\\\\f,userxattr"
    assert _model_view.overlay_options("/l", "/u", "/w", user_namespace=False) == (
        "lowerdir=/l,upperdir=/u,workdir=/w,redirect_dir=on"
    )
