"""What a failing harness reports about its error: the type and the innermost frame in the model
definition, and nothing for errors a restart can cure or that never passed through user code."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from pedl.harness.failure import failure_signature

MODEL = """
import json


def build_model():
    raise ValueError("bad layer size")


def parse():
    return json.loads("{not json")


def download():
    raise ConnectionError("dataset host unreachable")


def wrapped():
    try:
        download()
    except ConnectionError as e:
        raise RuntimeError("no data") from e
"""


def load(model_dir: Path) -> ModuleType:
    model_dir.mkdir()
    path = model_dir / "model_def.py"
    path.write_text(textwrap.dedent(MODEL))
    spec = importlib.util.spec_from_file_location("failure_model_def", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules.pop("failure_model_def", None)
    return module


def raised(fn) -> BaseException:
    with pytest.raises(BaseException) as info:
        fn()
    return info.value


def test_an_error_in_user_code_is_signed_with_its_type_and_line(tmp_path: Path) -> None:
    model = load(tmp_path / "model")
    signature = failure_signature(raised(model.build_model), tmp_path / "model")
    assert signature is not None
    assert (signature.exception_type, signature.location) == ("builtins.ValueError", "model_def.py:6")
    assert not signature.trained  # the agent says whether training had begun


def test_an_error_inside_a_library_is_located_at_the_user_call(tmp_path: Path) -> None:
    model = load(tmp_path / "model")
    signature = failure_signature(raised(model.parse), tmp_path / "model")
    assert signature is not None
    assert signature.exception_type == "json.decoder.JSONDecodeError"
    assert signature.location == "model_def.py:10"


def test_network_errors_get_no_signature_even_when_wrapped(tmp_path: Path) -> None:
    model = load(tmp_path / "model")
    assert failure_signature(raised(model.download), tmp_path / "model") is None
    assert failure_signature(raised(model.wrapped), tmp_path / "model") is None


def test_an_error_that_never_passed_through_the_model_definition_gets_none(tmp_path: Path) -> None:
    load(tmp_path / "model")

    def outside() -> None:
        raise FileNotFoundError("checkpoint directory missing")

    assert failure_signature(raised(outside), tmp_path / "model") is None


def test_det_invalid_hp_is_reported_as_such_wherever_determined_comes_from(tmp_path: Path) -> None:
    """The scheduler ends such a trial early (INVALID_HP) instead of failing it."""
    from pedl.harness.compat import ensure_determined_importable

    ensure_determined_importable()
    import determined as det

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "model_def.py").write_text(
        "import determined as det\n\n\ndef build():\n    raise det.InvalidHP('lr')\n"
    )
    spec = importlib.util.spec_from_file_location("invalid_hp_model_def", model_dir / "model_def.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    signature = failure_signature(raised(module.build), model_dir)
    assert signature is not None and signature.permanent
    assert (signature.exception_type, signature.location) == ("determined.InvalidHP", "model_def.py:5")

    class InvalidHP(Exception):  # a real Determined's lives in determined._execution
        pass

    InvalidHP.__module__ = "determined._execution"
    assert failure_signature(InvalidHP("x"), model_dir).exception_type == "determined.InvalidHP"  # type: ignore[union-attr]
    assert det.InvalidHP("x").args == ("x",)
