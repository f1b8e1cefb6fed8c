import textwrap
from pathlib import Path

import pytest

from pedl.harness.compat import ensure_determined_importable
from pedl.model_def import ModelDefinitionError, load_model_definition, parse_entrypoint

TRIAL = """
from pedl.pytorch import PyTorchTrial

class {name}(PyTorchTrial):
    def build_model(self, hparams): ...
    def optimizer(self, model): ...
    def losses(self, predictions, labels): ...
    def batch_size(self): return 1
    def validation_metrics(self, predictions, labels, losses): ...
"""

LOADERS = "def make_data_loaders(experiment_config, hparams):\n    return [], []\n"


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def model_dir(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    # A distinct package name per test: each is imported into this one process.
    directory = tmp_path / f"md_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}"
    directory.mkdir()
    return directory


def test_package_exposing_one_trial_and_loaders(model_dir: Path) -> None:
    write(
        model_dir,
        {
            "__init__.py": "from .model_def import MyTrial, download_data, make_data_loaders\n",
            "model_def.py": TRIAL.format(name="MyTrial")
            + LOADERS
            + "def download_data(c, h):\n    return '/d'\n",
        },
    )
    md = load_model_definition(model_dir)
    assert md.trial_class.__name__ == "MyTrial"
    assert md.make_data_loaders({}, {}) == ([], [])
    assert md.download_data is not None and md.download_data({}, {}) == "/d"


@pytest.mark.parametrize(
    ("entrypoint", "files", "expected"),
    [
        (":MyTrial", {"__init__.py": TRIAL.format(name="MyTrial") + LOADERS}, "MyTrial"),
        (
            "model_def:CIFAR10Trial",
            {"model_def.py": TRIAL.format(name="CIFAR10Trial") + LOADERS},
            "CIFAR10Trial",
        ),
        (
            "determined_lib.trial:trial_classes.NestedTrial",
            {
                "__init__.py": LOADERS,
                "determined_lib/__init__.py": "",
                "determined_lib/trial.py": "class trial_classes:\n"
                + textwrap.indent(TRIAL.format(name="NestedTrial"), "    "),
            },
            "NestedTrial",
        ),
    ],
)
def test_every_entrypoint_form(
    model_dir: Path, entrypoint: str, files: dict[str, str], expected: str
) -> None:
    write(model_dir, files)
    md = load_model_definition(model_dir, entrypoint)
    assert md.trial_class.__name__ == expected
    assert md.make_data_loaders({}, {}) == ([], [])


def test_entrypoint_module_with_relative_imports_and_two_trials(model_dir: Path) -> None:
    write(
        model_dir,
        {
            "__init__.py": "",
            "common/__init__.py": "",
            "common/base.py": TRIAL.format(name="Base") + LOADERS,
            "nets/trials.py": "from ..common.base import Base, make_data_loaders\n\nclass Other(Base): ...\n",
        },
    )
    # The module exposes two trials; the entrypoint picks one, and make_data_loaders comes along.
    assert load_model_definition(model_dir, "nets.trials:Other").trial_class.__name__ == "Other"


def test_single_file_model_definition(model_dir: Path) -> None:
    write(model_dir, {"mnist.py": TRIAL.format(name="MnistTrial") + LOADERS, "notes.txt": "x"})
    assert load_model_definition(model_dir).trial_class.__name__ == "MnistTrial"


def test_a_determined_trial_gets_no_download_data_hook(model_dir: Path) -> None:
    """Determined's examples name their own helper `download_data` (0.20's cifar10_tf_keras imports
    `download_data(download_directory, url)` into model_def and calls it from `__init__`): pedl
    must not call it as PEDL's `download_data(experiment_config, hparams)` hook."""
    ensure_determined_importable()
    write(
        model_dir,
        {
            "data.py": "def download_data(download_directory, url):\n    return download_directory\n",
            "model_def.py": """
                from data import download_data
                from determined import pytorch

                class CIFARTrial(pytorch.PyTorchTrial):
                    def __init__(self, context):
                        self.context = context
                    def build_training_data_loader(self): ...
                    def build_validation_data_loader(self): ...
                    def train_batch(self, batch, epoch_idx, batch_idx): ...
                    def evaluate_batch(self, batch): ...
            """,
        },
    )
    md = load_model_definition(model_dir, "model_def:CIFARTrial")
    assert md.trial_class.__name__ == "CIFARTrial"
    assert md.download_data is None


def test_make_data_loaders_falls_back_to_the_package_init(model_dir: Path) -> None:
    write(model_dir, {"__init__.py": LOADERS, "model_def.py": TRIAL.format(name="T")})
    assert load_model_definition(model_dir, "model_def:T").make_data_loaders({}, {}) == ([], [])


def test_no_trial_class_is_an_error(model_dir: Path) -> None:
    write(model_dir, {"__init__.py": "from pedl.pytorch import PyTorchTrial\n" + LOADERS})
    with pytest.raises(ModelDefinitionError, match=r"__init__.py exposes no Trial subclass"):
        load_model_definition(model_dir)


def test_two_trial_classes_are_named(model_dir: Path) -> None:
    write(model_dir, {"__init__.py": TRIAL.format(name="A") + TRIAL.format(name="B") + LOADERS})
    with pytest.raises(
        ModelDefinitionError, match=r"exposes 2 Trial subclasses: A \(__init__.py:4\), B \(__init__.py:1\d\)"
    ):
        load_model_definition(model_dir)


def test_syntax_error_reports_file_and_line(model_dir: Path) -> None:
    write(
        model_dir,
        {"__init__.py": "from .model_def import *\n", "model_def.py": "x = 1\n\ndef f(:\n    pass\n"},
    )
    with pytest.raises(ModelDefinitionError, match=r"model_def.py:3: .*SyntaxError"):
        load_model_definition(model_dir)


def test_import_error_reports_file_and_line(model_dir: Path) -> None:
    write(model_dir, {"__init__.py": "import os\nimport no_such_module_xyz\n"})
    with pytest.raises(ModelDefinitionError, match=r"__init__.py:2: .*No module named 'no_such_module_xyz'"):
        load_model_definition(model_dir)


def test_missing_abstract_method_is_named(model_dir: Path) -> None:
    source = TRIAL.format(name="Half").replace("    def batch_size(self): return 1\n", "")
    source = source.replace("    def losses(self, predictions, labels): ...\n", "")
    write(model_dir, {"__init__.py": source + LOADERS})
    with pytest.raises(
        ModelDefinitionError,
        match=r"Half \(__init__.py:4\) does not implement the PyTorchTrial "
        r"method\(s\): batch_size, losses",
    ):
        load_model_definition(model_dir)


def test_missing_make_data_loaders(model_dir: Path) -> None:
    write(model_dir, {"__init__.py": TRIAL.format(name="T")})
    with pytest.raises(
        ModelDefinitionError, match=r"defines no make_data_loaders\(experiment_config, hparams\)"
    ):
        load_model_definition(model_dir)


def test_entrypoint_errors_are_specific(model_dir: Path) -> None:
    write(model_dir, {"__init__.py": LOADERS, "model_def.py": TRIAL.format(name="T") + "NOT_A_CLASS = 3\n"})
    with pytest.raises(ModelDefinitionError, match=r"module 'missing' not found .* expected missing.py"):
        load_model_definition(model_dir, "missing:T")
    with pytest.raises(ModelDefinitionError, match=r"model_def.py has no attribute 'Nope' \(it has: .*T"):
        load_model_definition(model_dir, "model_def:Nope")
    with pytest.raises(ModelDefinitionError, match=r"'model_def:NOT_A_CLASS' is a int, not a subclass"):
        load_model_definition(model_dir, "model_def:NOT_A_CLASS")


@pytest.mark.parametrize("text", ["model_def", "a:b:c", "model-def:T", "model_def:"])
def test_malformed_entrypoints(text: str) -> None:
    with pytest.raises(ModelDefinitionError, match="entrypoint"):
        parse_entrypoint(text)


def test_reloading_a_model_definition_picks_up_new_code(model_dir: Path) -> None:
    write(model_dir, {"__init__.py": TRIAL.format(name="First") + LOADERS})
    assert load_model_definition(model_dir).trial_class.__name__ == "First"
    write(model_dir, {"__init__.py": TRIAL.format(name="Second") + LOADERS})
    assert load_model_definition(model_dir).trial_class.__name__ == "Second"


def test_directory_name_that_is_not_an_identifier(tmp_path: Path) -> None:
    directory = write(tmp_path / "my-model 2", {"__init__.py": TRIAL.format(name="T") + LOADERS})
    md = load_model_definition(directory)
    assert md.package == "my_model_2" and md.trial_class.__name__ == "T"
