"""Determined's e2e_tests tree as scripts/determined-e2e runs it with no internet: a copy in the run's
own folder (the upstream tree is read, never written), its tests unchanged, where

- each fixture file that holds only a relative link (`../../../../examples/tutorials/mnist_pytorch/
  train.py`: Determined's git symlinks, stored as their target's path) is the file it names, as
  Determined's `det` uploads it from a checkout;
- a fixture that reads MNIST with torchvision from `data/` beside its code (`mnist_pytorch`) finds
  the conformance suite's stand-in MNIST there (`standin_data.write_mnist_raw`), so its download
  finds the files present and fetches nothing;
- `examples/` beside the copy is the upstream one (the tests reach the tutorials through `../../`).

    python tests/determined_e2e/standin_tree.py UPSTREAM_E2E_TESTS DEST   (prints DEST/e2e_tests)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance" / "published"))
from standin_data import write_mnist_raw  # noqa: E402 (the conformance suite's stand-ins, shared)

LINK_MAX = 300  # a link-holding file is one short line
MNIST_FIXTURES = ("mnist_pytorch",)  # torchvision's MNIST under `data/` (the tutorial's data.py)


def _link_target(path: Path) -> Path | None:
    """The file `path` stands for when it holds only a relative path to an existing file."""
    if path.stat().st_size > LINK_MAX:
        return None
    try:
        text = path.read_text().strip()
    except UnicodeDecodeError:
        return None
    if "\n" in text or not text.startswith("../"):
        return None
    target = (path.parent / text).resolve()
    return target if target.is_file() else None


def prepare(upstream: Path, dest: Path) -> Path:
    """The copy of `upstream` (an e2e_tests folder) under `dest`; returns its e2e_tests folder."""
    tree = dest / "e2e_tests"
    shutil.copytree(upstream, tree, symlinks=True)
    for path in [tree, *tree.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the upstream copy is read-only
    examples = upstream.resolve().parent / "examples"
    if examples.is_dir():
        (dest / "examples").symlink_to(examples)
    fixtures = tree / "tests" / "fixtures"
    for path in sorted(fixtures.rglob("*")):
        if path.is_file() and not path.is_symlink():
            upstream_path = upstream / path.relative_to(tree)
            target = _link_target(upstream_path)
            if target is not None:
                shutil.copyfile(target, path)
    for name in MNIST_FIXTURES:
        if (fixtures / name).is_dir():
            write_mnist_raw(fixtures / name / "data" / "MNIST" / "raw")
    return tree


if __name__ == "__main__":
    print(prepare(Path(sys.argv[1]), Path(sys.argv[2])))
