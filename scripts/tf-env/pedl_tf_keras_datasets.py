"""`tensorflow.python.keras.datasets` for TensorFlow 2.12's environment (`scripts/build-tf-env 2.12`),
which stands in for the TF 2.2-2.8 images Determined 0.12 to 0.20 ran their Keras examples in.

Those images' TensorFlow still shipped its internal copy of Keras's datasets (last in TF 2.7, which has
no wheel for Python 3.11), and 0.12 and 0.15's CIFAR-10 examples import `load_batch` from it. TF 2.12
keeps `tensorflow.python.keras` but not its `datasets`; the same code moved to Keras 2.12's
`keras.datasets`. This finder answers the old names with those modules (the same module objects, so
`tensorflow.python.keras.datasets.cifar is keras.datasets.cifar`); any other name under the package
is left to fail as before. build-tf-env copies this file into that environment's site-packages with a
`.pth` that installs the finder at startup: nothing is written into TensorFlow's own folder, and no other
environment gets it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

ALIAS = "tensorflow.python.keras.datasets"
TARGET = "keras.datasets"
# What TF 2.7's tensorflow/python/keras/datasets held, each in Keras 2.12 under the same name.
SUBMODULES = frozenset(
    {"boston_housing", "cifar", "cifar10", "cifar100", "fashion_mnist", "imdb", "mnist", "reuters"}
)


def target_of(fullname: str) -> str | None:
    """The Keras module an old name stands for, or None for a name outside the mapping."""
    if fullname == ALIAS:
        return TARGET
    parent, _, child = fullname.rpartition(".")
    return f"{TARGET}.{child}" if parent == ALIAS and child in SUBMODULES else None


class _AliasLoader(importlib.abc.Loader):
    """Puts the target module in sys.modules under the old name; the import system then hands that
    entry out (and sets it on the parent package), so the target keeps its own name and spec."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[module.__name__] = importlib.import_module(self.target)


class KerasDatasetsAlias(importlib.abc.MetaPathFinder):
    """Finds only the mapped names; first on sys.meta_path, so the path finder does not load a second
    copy of keras/datasets/*.py from the aliased package's __path__."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        name = target_of(fullname)
        if name is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(name), is_package=fullname == ALIAS)


def install() -> None:
    """Registers the finder once (the .pth runs this at interpreter startup; importing the module
    alone changes nothing)."""
    if not any(isinstance(finder, KerasDatasetsAlias) for finder in sys.meta_path):
        sys.meta_path.insert(0, KerasDatasetsAlias())
