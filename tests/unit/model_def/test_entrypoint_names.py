"""An entrypoint naming nothing the module defines, or a function, is refused at create in one line
naming the entrypoint and the file (#37.5: each ran every restart before failing on the agent);
a name the source cannot settle is left to the agent."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from pedl.model_def import ModelDefinitionError
from pedl.model_def.entrypoint_names import entrypoint_refusal
from pedl.model_def.static_check import check_model_definition

TRIAL = """
from pedl.pytorch import PyTorchTrial

class MyTrial(PyTorchTrial):
    pass

def make_data_loaders(config, hparams):
    return None, None
"""


def refusal(source: str, ref: str, submodules: set[str] | None = None) -> str | None:
    tree = ast.parse(textwrap.dedent(source))
    return entrypoint_refusal(tree, ref, "model_def.py", submodules or set())


def test_a_missing_name_is_refused_listing_the_classes_there() -> None:
    assert refusal(TRIAL, "NoSuchTrial") == "model_def.py defines no 'NoSuchTrial' (its classes: MyTrial)"
    assert refusal("x = 1\n", "MyTrial") == "model_def.py defines no 'MyTrial' (its classes: none)"
    assert refusal(TRIAL, "Missing.Inner") == "model_def.py defines no 'Missing' (its classes: MyTrial)"


def test_a_plain_function_is_refused_with_its_line() -> None:
    assert refusal(TRIAL, "make_data_loaders") == (
        "'make_data_loaders' in model_def.py, line 7, is a function, not a Trial class"
    )


@pytest.mark.parametrize(
    "source",
    [
        TRIAL,
        "from trials import MyTrial\n",
        "import MyTrial\n",
        "MyTrial = make_trial()\n",
        "MyTrial: type = make_trial()\n",
        "for MyTrial in [object]:\n    pass\n",
        "with make() as MyTrial:\n    pass\n",
        "if (MyTrial := make()):\n    pass\n",
        "try:\n    from a import MyTrial\nexcept ImportError:\n    class MyTrial: pass\n",
        "if FAST:\n    def MyTrial(): pass\nelse:\n    class MyTrial: pass\n",
        "def MyTrial(): pass\nMyTrial = wrap(MyTrial)\n",
        "@trial_factory\ndef MyTrial(): pass\n",
    ],
    ids=["class", "from-import", "import", "assigned", "annotated", "loop", "with", "walrus",
         "try-fallback", "class-or-function", "rebound", "decorated"],
)  # fmt: skip
def test_a_name_bound_otherwise_or_maybe_a_class_is_left_to_the_agent(source: str) -> None:
    assert refusal(source, "MyTrial") is None


@pytest.mark.parametrize(
    "source",
    [
        "from trials import *\n",
        "globals()['MyTrial'] = make()\n",
        "import sys\nsetattr(sys.modules[__name__], 'MyTrial', make())\n",
        "exec(open('gen.py').read())\n",
        "def __getattr__(name):\n    return make(name)\n",
        "def install():\n    global MyTrial\n    MyTrial = make()\ninstall()\n",
    ],
    ids=["star-import", "globals", "setattr", "exec", "module-getattr", "global-statement"],
)
def test_a_module_that_may_gain_names_at_run_time_is_never_refused(source: str) -> None:
    assert refusal(source, "MyTrial") is None
    assert refusal(source + "def make_data_loaders(): pass\n", "make_data_loaders") is None


def test_a_packages_submodule_is_an_attribute_not_a_missing_name() -> None:
    assert refusal("x = 1\n", "trials.MyTrial", submodules={"trials"}) is None


def _write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


@pytest.mark.parametrize(
    ("entrypoint", "message"),
    [
        (
            ":NoSuchTrial",
            "entrypoint ':NoSuchTrial': __init__.py defines no 'NoSuchTrial' (its classes: MyTrial)",
        ),
        (
            "model_def:make_data_loaders",
            "entrypoint 'model_def:make_data_loaders': 'make_data_loaders' in model_def.py, line 7, "
            "is a function, not a Trial class",
        ),
        (
            "python3 -m determined.launch.torch_distributed --trial model_def:Nope",
            "entrypoint 'model_def:Nope': model_def.py defines no 'Nope' (its classes: MyTrial)",
        ),
    ],
)
def test_the_static_check_refuses_in_one_line_naming_entrypoint_and_file(
    tmp_path: Path, entrypoint: str, message: str
) -> None:
    model = _write(tmp_path / "model", {"__init__.py": TRIAL, "model_def.py": TRIAL})
    with pytest.raises(ModelDefinitionError) as refused:
        check_model_definition(model, entrypoint)
    assert str(refused.value) == message
    check_model_definition(model, entrypoint.replace("NoSuchTrial", "MyTrial").replace("Nope", "MyTrial")
                           .replace("make_data_loaders", "MyTrial"))  # fmt: skip


def test_the_package_form_finds_a_class_its_init_imports_from_a_sibling(tmp_path: Path) -> None:
    model = _write(tmp_path / "model", {"__init__.py": "from .model_def import *\n", "model_def.py": TRIAL})
    check_model_definition(model, ":MyTrial")
    check_model_definition(model, ":Whatever")  # the star import may bring it: the agent will say
    model2 = _write(
        tmp_path / "model2", {"__init__.py": "from .model_def import MyTrial\n", "model_def.py": TRIAL}
    )
    check_model_definition(model2, ":MyTrial")
