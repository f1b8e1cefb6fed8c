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


def test_a_model_definition_that_cannot_be_imported_is_signed_by_the_import_error(tmp_path: Path) -> None:
    """The loader wraps the user's ImportError in ModelDefinitionError, raised from pedl's frames: the
    signature is the ImportError's, where it arose, so that two such runs end the trial (#37.5)."""
    from pedl.model_def import load_model_definition
    from pedl.model_def.errors import ModelDefinitionError

    model_dir = tmp_path / "imports_missing"
    model_dir.mkdir()
    (model_dir / "__init__.py").write_text("import json\nimport pedl_no_such_module\n")
    with pytest.raises(ModelDefinitionError) as raised:
        load_model_definition(model_dir)
    signature = failure_signature(raised.value, model_dir)
    assert signature is not None
    assert (signature.exception_type, signature.location) == ("builtins.ModuleNotFoundError", "__init__.py:2")
    assert not signature.permanent


def test_a_loader_refusal_wrapping_no_user_error_is_permanent(tmp_path: Path) -> None:
    """An entrypoint naming no class (or a module missing from the archive) fails every run alike."""
    from pedl.model_def.errors import ModelDefinitionError

    signature = failure_signature(ModelDefinitionError("entrypoint ':f' names f, not a Trial"), tmp_path)
    assert signature is not None and signature.permanent
    assert signature.exception_type == "pedl.model_def.errors.ModelDefinitionError"


def test_a_model_definition_failing_on_the_network_at_import_gets_no_signature(tmp_path: Path) -> None:
    from pedl.model_def import load_model_definition
    from pedl.model_def.errors import ModelDefinitionError

    model_dir = tmp_path / "imports_download"
    model_dir.mkdir()
    (model_dir / "__init__.py").write_text("raise ConnectionError('dataset host unreachable')\n")
    with pytest.raises(ModelDefinitionError) as raised:
        load_model_definition(model_dir)
    assert failure_signature(raised.value, model_dir) is None
