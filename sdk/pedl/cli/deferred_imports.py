"""Loads asyncio, grpc.aio and other modules a scheduler command rarely uses when first used, not on import.

`import grpc` imports grpc.aio, whose classes import asyncio (and with it ssl, inspect, concurrent):
about a third of a scheduler command's start, for commands whose calls are all blocking ones. Each
module is put in `sys.modules` as a stand-in that has the real module's spec; the first attribute
read on it (other than `__name__`, `__spec__`, `__file__`, `__loader__`, `__package__`) imports the
real module and copies its namespace into the stand-in, so code that imported the stand-in goes on
with the real names. The standard
`importlib.util.LazyLoader` cannot do this: the import system reads `__spec__` on every later
`import asyncio`, which loads a LazyLoader module at once (what cygrpc's own `import asyncio` does).

Only the `pedl` program installs these (`main()` run as a command), never a library import: a
process that monkeypatches asyncio after its first use would patch the real module, not the stand-in,
and code that walks `sys.modules` reading other attributes would load one mid-walk.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Any

# asyncio and grpc.aio: see above. grpc_tools, grpc_health, grpc_reflection: `import grpc` imports
# each package only to alias it as grpc.tools/.health/.reflection. python_message: protobuf's
# pure-Python messages, imported by its descriptor pool (with text_format, the decoders, pickle and
# the well-known types' helpers) though the C (upb) messages pedl runs on never use it: ~6% of
# `pedl experiment list`'s instructions (callgrind, 472M to 441M).
DEFERRED = (
    "asyncio",
    "grpc.aio",
    "grpc_tools",
    "grpc_health",
    "grpc_reflection",
    "google.protobuf.internal.python_message",
)
_lock = threading.RLock()


class _Deferred(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:  # called only for names the stand-in lacks
        name = self.__dict__["__name__"]
        with _lock:
            real = sys.modules.get(name)
            if real is self or real is None:
                del sys.modules[name]
                real = importlib.import_module(name)
            if self.__dict__.get("__loaded__") is not real:
                self.__dict__.update(real.__dict__)
                self.__dict__["__loaded__"] = real
        return getattr(real, attr)


def _spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """`name`'s spec, found package by package on their search paths without importing any of them
    (`importlib.util.find_spec` would import the parents of a dotted name)."""
    parts = name.split(".")
    spec = importlib.util.find_spec(parts[0])  # a top-level name: found without importing it
    for depth in range(1, len(parts)):
        locations = spec.submodule_search_locations if spec else None
        if not locations:
            return None
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), list(locations))
    return spec


def install() -> None:
    """Defer each of DEFERRED that is not imported yet (nor its package); a module that cannot be
    found is left to fail where it is imported, as it would without this."""
    for name in DEFERRED:
        if name in sys.modules or name.split(".")[0] in sys.modules:
            continue
        spec = _spec(name)
        if spec is None:
            continue
        stand_in = _Deferred(name)
        # The attributes tools read without meaning to use the module; `__path__` is left out, so
        # importing a submodule first imports the package itself, in its own order.
        stand_in.__spec__ = spec
        stand_in.__file__ = spec.origin
        stand_in.__loader__ = spec.loader
        stand_in.__package__ = spec.parent
        sys.modules[name] = stand_in


def loaded(name: str) -> bool:
    """Whether `name` was really imported (a stand-in not yet used is not)."""
    module = sys.modules.get(name)
    return module is not None and not (isinstance(module, _Deferred) and "__loaded__" not in vars(module))
