"""Importing a model definition directory as a package named after the directory.

The package is created from the directory itself (not found on sys.path), so a directory
whose name clashes with nothing else imports the same way wherever it was unpacked, relative
imports inside it work, and a second load in one process (local/test mode) gets fresh code.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from pedl.model_def.errors import ModelDefinitionError, from_user_exception

# Marks packages this module created, so reloading may replace them but nothing else.
_MARK = "__pedl_model_definition__"


def package_name(directory: Path) -> str:
    """The import name for a model definition directory ('my-model' becomes 'my_model')."""
    name = re.sub(r"\W", "_", directory.name)
    if not name or name[0].isdigit():
        name = f"_{name}"
    return name


def _add_to_sys_path(*paths: Path) -> None:
    for path in reversed(paths):
        text = str(path)
        if text in sys.path:
            sys.path.remove(text)
        sys.path.insert(0, text)


def _forget(name: str) -> None:
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]


def import_package(directory: Path) -> ModuleType:
    """Imports `directory` as package `package_name(directory)`, running its `__init__.py` if any.

    `directory` and its parent go on sys.path so absolute imports of sibling modules work too.
    """
    name = package_name(directory)
    existing = sys.modules.get(name)
    if existing is not None and not getattr(existing, _MARK, False):
        where = getattr(existing, "__file__", None) or "built in"
        raise ModelDefinitionError(
            f"model definition directory {directory.name!r} would be imported as {name!r}, which is "
            f"already an imported module ({where}); rename the directory"
        )
    if existing is None and name in sys.stdlib_module_names:
        raise ModelDefinitionError(
            f"model definition directory {directory.name!r} has the name of the standard library "
            f"module {name!r}; rename the directory"
        )
    _forget(name)
    importlib.invalidate_caches()
    _add_to_sys_path(directory, directory.parent)
    init = directory / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(directory)])
    else:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(directory)]
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    setattr(module, _MARK, True)
    sys.modules[name] = module
    if spec.loader is not None:
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            _forget(name)
            raise from_user_exception(f"importing {init.name}", exc, directory) from exc
    return module


def import_submodule(package: ModuleType, module: str, directory: Path) -> ModuleType:
    """Imports `<package>.<module>` (module dotted, relative to the model definition root)."""
    full = f"{package.__name__}.{module}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (exc.name == full or full.startswith(exc.name + ".")):
            path = module.replace(".", "/")
            raise ModelDefinitionError(
                f"module {module!r} not found in the model definition: expected {path}.py or "
                f"{path}/__init__.py under {directory}"
            ) from exc
        raise from_user_exception(f"importing {module!r}", exc, directory) from exc
    except Exception as exc:
        raise from_user_exception(f"importing {module!r}", exc, directory) from exc
