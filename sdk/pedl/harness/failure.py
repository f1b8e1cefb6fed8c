"""The signature of the error a harness exits with: its type and where in the user's code it arose.

The scheduler does not restart a trial whose runs fail with the same signature before training
(pedl_scheduler.experiments.failures): a model definition that raises in `build_model` raises
there on every restart. Errors that a restart can cure are never given a signature: those raised
outside the model definition (pedl's own code reaching the agent or checkpoint store, a library
reached without passing through user code) and the network's (connection, timeout, DNS, gRPC).
One network error is the exception: ranks that cannot reach each other (`RanksUnreachable`) fail
the same way on every run, so its signature is `permanent`.

A model definition that cannot be loaded (`ModelDefinitionError`) is signed by the user error it wraps
(an ImportError at `__init__.py:1` is signed as that ImportError, where it arose), so that two runs
failing to import end the trial; one that wraps nothing (an entrypoint naming no class, a module missing
from the archive) is a fact about the experiment's archive and config, which no run changes: it is
`permanent`, and the trial ends after that run. So is a model definition written for older libraries
than the trial's (`incompatibility`: NumPy's removed aliases, Keras 2's optimizers).
"""

from __future__ import annotations

import socket
import urllib.error
from pathlib import Path
from types import TracebackType

import pedl
from pedl.harness import incompatibility
from pedl.harness.distributed import is_peer_failure
from pedl.harness.rank_network import RanksUnreachable
from pedl.harness.store_retry import StoreUnavailable
from pedl.model_def import ModelDefinitionError
from pedl.v1 import agent_pb2

# Exception classes whose cause is outside the trial, whatever frame raised them.
TRANSIENT = (ConnectionError, TimeoutError, socket.gaierror, urllib.error.URLError, StoreUnavailable)
_PEDL_DIR = Path(pedl.__file__).resolve().parent


# What a trial's `det.InvalidHP` is reported as (pedl's `determined` package or a real Determined's):
# the scheduler ends the trial early (INVALID_HP), COMPLETED and without a restart, as Determined does.
INVALID_HP = "determined.InvalidHP"


def is_invalid_hp(exc: BaseException) -> bool:
    kind = type(exc)
    return kind.__name__ == "InvalidHP" and kind.__module__.split(".")[0] == "determined"


def failure_signature(exc: BaseException, model_dir: Path) -> agent_pb2.FailureSignature | None:
    """The exception's qualified type and its innermost frame inside `model_dir`; None when the error
    is transient or did not pass through the model definition's code."""
    if is_invalid_hp(exc):
        where = _innermost_user_frame(exc.__traceback__, model_dir.resolve()) or ""
        return agent_pb2.FailureSignature(exception_type=INVALID_HP, location=where, permanent=True)
    if isinstance(exc, RanksUnreachable):
        return agent_pb2.FailureSignature(exception_type=_qualified(type(exc)), permanent=True)
    if _transient(exc) or is_peer_failure(exc):
        return None
    if incompatibility.explain(exc) is not None:  # the libraries stay what they are on every run
        where = _innermost_user_frame(exc.__traceback__, model_dir.resolve()) or ""
        return agent_pb2.FailureSignature(
            exception_type=_qualified(type(exc)), location=where, permanent=True
        )
    if isinstance(exc, ModelDefinitionError):
        return _model_definition_signature(exc, model_dir)
    location = _innermost_user_frame(exc.__traceback__, model_dir.resolve())
    if location is None:
        return None
    return agent_pb2.FailureSignature(exception_type=_qualified(type(exc)), location=location)


def _model_definition_signature(
    exc: ModelDefinitionError, model_dir: Path
) -> agent_pb2.FailureSignature | None:
    """The user error the loader wrapped, where it arose; the loader's own refusal when it wrapped none."""
    cause = exc.__cause__
    if cause is None:
        return agent_pb2.FailureSignature(exception_type=_qualified(type(exc)), permanent=True)
    location = _innermost_user_frame(cause.__traceback__, model_dir.resolve())
    if location is None:  # a module missing from the archive: the archive never changes
        return agent_pb2.FailureSignature(exception_type=_qualified(type(exc)), permanent=True)
    return agent_pb2.FailureSignature(exception_type=_qualified(type(cause)), location=location)


def _qualified(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _transient(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        # grpc.RpcError by name: the harness need not import grpc's error hierarchy to recognise it.
        if isinstance(seen, TRANSIENT) or any(c.__name__ == "RpcError" for c in type(seen).__mro__):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _innermost_user_frame(tb: TracebackType | None, model_dir: Path) -> str | None:
    found = None
    while tb is not None:
        path = Path(tb.tb_frame.f_code.co_filename)
        if path.is_absolute() and _is_user_code(path, model_dir):
            found = f"{path.resolve().relative_to(model_dir).as_posix()}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def _is_user_code(path: Path, model_dir: Path) -> bool:
    resolved = path.resolve()
    if not resolved.is_relative_to(model_dir) or resolved.is_relative_to(_PEDL_DIR):
        return False
    return not {"site-packages", "dist-packages"} & set(resolved.parts)
