"""Errors that mean a model definition was written for older libraries than the trial runs with: the
one line a user reads in the trial's error (and so in the experiment's failure reason) instead of a
stack trace alone. pedl cannot cure these without changing the user's libraries under them (putting
back an alias NumPy removed, or swapping TensorFlow's Keras 3 for Keras 2), so it names the cause,
the library version installed and the change to make; the traceback stays in the trial's log.

Found by running Determined's published examples unchanged (tests/conformance/published/):
0.12's `mnist_pytorch_multi_output` uses `np.int`, 0.23 to 0.34's `iris_tf_keras` imports
`tensorflow.keras.optimizers.legacy`, and the CIFAR-10 Keras examples import `load_batch` from
`keras.datasets.cifar` or `tensorflow.python.keras.datasets` (in Keras 3, or where TensorFlow lacks
it; TensorFlow 2.12's environment maps the latter onto Keras 2.12's `keras.datasets`:
scripts/build-tf-env); 0.15 to 0.23's `word_language_model` passes `verbose=` to torch's
`ReduceLROnPlateau`.
"""

from __future__ import annotations

import re
import sys
import sysconfig
import traceback
from importlib import metadata
from pathlib import Path
from types import TracebackType

import pedl

# NumPy 1.24 removed these aliases of builtins (deprecated in 1.20); NumPy 2.0 removed more.
_NUMPY_ALIASES = {
    "int": "int (or np.int64)",
    "float": "float (or np.float64)",
    "bool": "bool (or np.bool_)",
    "object": "object",
    "str": "str",
    "long": "int",
    "unicode": "str",
    "complex": "complex (or np.complex128)",
    "float_": "np.float64",
    "complex_": "np.complex128",
    "unicode_": "np.str_",
    "string_": "np.bytes_",
    "NaN": "np.nan",
    "Inf": "np.inf",
    "infty": "np.inf",
    "product": "np.prod",
    "cumproduct": "np.cumprod",
    "alltrue": "np.all",
    "sometrue": "np.any",
}
_NUMPY_MISSING = re.compile(r"module 'numpy' has no attribute '(\w+)'")
_KERAS_LEGACY = re.compile(r"keras\.optimizers\.legacy")
_UNEXPECTED_KEYWORD = re.compile(r"^(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'")
_PEDL_DIR = Path(pedl.__file__).resolve().parent
_SDK_DIR = _PEDL_DIR.parent


def explain(exc: BaseException) -> str | None:
    """One line naming the cause when `exc` (or an error it wraps) is a known incompatibility of the
    model definition with the installed libraries; None for any other error."""
    for seen in _chain(exc):
        line = (
            _numpy_alias(seen)
            or _keras_legacy(seen)
            or _keras_2_module(seen)
            or _torch_scheduler_verbose(seen)
        )
        if line:
            where = _user_frame(seen.__traceback__)
            return f"{line}{f' (at {where})' if where else ''}"
    return None


def _numpy_alias(exc: BaseException) -> str | None:
    if not isinstance(exc, AttributeError):
        return None
    found = _NUMPY_MISSING.search(str(exc).splitlines()[0] if str(exc) else "")
    if found is None or found.group(1) not in _NUMPY_ALIASES:
        return None
    name = found.group(1)
    return (
        f"the model definition uses np.{name}, an alias NumPy removed (installed: NumPy "
        f"{_version('numpy')}); it was written for an older NumPy: use {_NUMPY_ALIASES[name]} instead"
    )


def _keras_legacy(exc: BaseException) -> str | None:
    if not isinstance(exc, (ImportError, AttributeError)) or not _KERAS_LEGACY.search(str(exc)):
        return None
    return (
        "the model definition imports tf.keras.optimizers.legacy (Keras 2's optimizers), which the "
        f"installed TensorFlow {_version('tensorflow')} with Keras {_version('keras')} (Keras 3) does "
        "not have; it was written for TensorFlow 2.11 to 2.15: use tf.keras.optimizers (such as "
        "tf.keras.optimizers.RMSprop) instead"
    )


def _keras_2_module(exc: BaseException) -> str | None:
    """A module of Keras 2 that Keras 3 dropped (`keras.datasets.cifar`), or one of TensorFlow's
    internal copy of Keras 2 that the installed TensorFlow lacks (`tensorflow.python.keras`: its
    `datasets` went after 2.7, the whole copy in 2.16; TensorFlow 2.12's environment gets `datasets`
    back as an alias of Keras 2.12's, so there only names outside that mapping reach this)."""
    name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if not name:
        return None
    if name == "tensorflow.python.keras" or name.startswith("tensorflow.python.keras."):
        return (
            f"the model definition imports {name}, TensorFlow's internal copy of Keras 2, which the "
            f"installed TensorFlow {_version('tensorflow')} does not have; it was written for an older "
            "TensorFlow: use tf.keras instead"
        )
    if name.startswith("keras.") and _keras_3():
        return (
            f"the model definition imports {name}, a module of Keras 2 that the installed Keras "
            f"{_version('keras')} (Keras 3) does not have; it was written for TensorFlow 2.15 or older"
        )
    return None


def _torch_scheduler_verbose(exc: BaseException) -> str | None:
    """`verbose=` given to one of torch's LR schedulers, which no longer take it (deprecated in
    torch 2.2, since removed)."""
    found = _UNEXPECTED_KEYWORD.match(str(exc)) if isinstance(exc, TypeError) else None
    schedulers = sys.modules.get("torch.optim.lr_scheduler")
    if found is None or found.group(2) != "verbose" or not hasattr(schedulers, found.group(1)):
        return None
    return (
        f"the model definition passes verbose= to torch's {found.group(1)}, which torch's LR schedulers "
        f"no longer take (installed: torch {_version('torch')}); it was written for an older torch: "
        "drop verbose= (log the scheduler's get_last_lr() instead)"
    )


def _keras_3() -> bool:
    return _version("keras").split(".")[0] == "3"


def _chain(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in found:
        found.append(seen)
        seen = seen.__cause__ or seen.__context__
    return found


def _version(module: str) -> str:
    """The version of the module the trial imported (TensorFlow's distribution has several names)."""
    loaded = sys.modules.get(module)
    version = getattr(loaded, "__version__", None)
    if isinstance(version, str):
        return version
    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def _user_frame(tb: TracebackType | None) -> str:
    """`file.py:LINE` of the innermost frame outside pedl, the standard library and installed
    packages: the model definition's line that raised."""
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    found = ""
    while tb is not None:
        path = Path(tb.tb_frame.f_code.co_filename)
        if path.is_absolute() and _is_users(path.resolve(), stdlib):
            found = f"{path.name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def _is_users(path: Path, stdlib: Path) -> bool:
    if path.is_relative_to(_SDK_DIR) or path.is_relative_to(stdlib):
        return False
    return not {"site-packages", "dist-packages"} & set(path.parts) and "<frozen" not in str(path)


def report(exc: BaseException) -> bool:
    """For a known incompatibility: the traceback to stdout (the trial's log) and the one line to
    stderr (the trial's error); True then. False, printing nothing, for any other error."""
    line = explain(exc)
    if line is None:
        return False
    traceback.print_exception(exc, file=sys.stdout)
    sys.stdout.flush()
    print(f"pedl.harness: {line}", file=sys.stderr)
    return True
