"""A model definition written for older libraries fails with one line naming the cause, the
installed version and the change to make (the trial's error, so the experiment's failure reason),
its traceback going to the trial's log: Determined 0.12's `np.int`, 0.23's Keras 2 optimizers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from pedl.harness import incompatibility
from pedl.model_def import ModelDefinitionError


def load(tmp_path: Path, source: str):
    path = tmp_path / "data.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("published_data", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def raised(call) -> BaseException:
    with pytest.raises(Exception) as info:
        call()
    return info.value


def test_a_numpy_alias_removed_since_is_named_with_its_replacement_and_line(tmp_path) -> None:
    data = load(tmp_path, "import numpy as np\n\ndef labels(x):\n    return (x >= 5).astype(np.int)\n")
    exc = raised(lambda: data.labels(np.arange(10)))
    line = incompatibility.explain(exc)
    assert line == (
        f"the model definition uses np.int, an alias NumPy removed (installed: NumPy {np.__version__}); "
        "it was written for an older NumPy: use int (or np.int64) instead (at data.py:4)"
    )


def test_keras_2_optimizers_are_named_with_the_keras_3_ones_to_use(tmp_path) -> None:
    # What Keras 3 raises when a model definition builds `tensorflow.keras.optimizers.legacy.RMSprop`.
    message = "`keras.optimizers.legacy` is not supported in Keras 3. When using `tf.keras`, ..."
    data = load(tmp_path, f"def build():\n    raise ImportError({message!r})\n")
    exc = raised(data.build)
    line = incompatibility.explain(exc)
    assert line is not None and "\n" not in line
    assert line.startswith("the model definition imports tf.keras.optimizers.legacy (Keras 2's optimizers)")
    assert "use tf.keras.optimizers (such as tf.keras.optimizers.RMSprop) instead (at data.py:2)" in line


def test_an_error_the_loader_wraps_is_explained_too(tmp_path) -> None:
    data = load(tmp_path, "import numpy as np\n\ndef labels():\n    return np.float(1)\n")
    try:
        data.labels()
    except AttributeError as cause:
        try:
            raise ModelDefinitionError("cannot load the model definition") from cause
        except ModelDefinitionError as wrapped:
            line = incompatibility.explain(wrapped)
    assert line is not None and "uses np.float" in line and "use float (or np.float64)" in line


def test_other_errors_are_left_to_their_traceback(tmp_path, capsys) -> None:
    data = load(tmp_path, "import numpy as np\n\ndef f():\n    return np.no_such_thing\n")
    for exc in (raised(data.f), ValueError("np.int"), ImportError("No module named 'keras_cv'")):
        assert incompatibility.explain(exc) is None
        assert incompatibility.report(exc) is False
    assert capsys.readouterr() == ("", "")


def test_report_puts_the_line_on_stderr_and_the_traceback_on_stdout(tmp_path, capsys) -> None:
    data = load(tmp_path, "import numpy as np\n\ndef f():\n    return np.object\n")
    assert incompatibility.report(raised(data.f)) is True
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("pedl.harness: the model definition uses np.object")
    assert "Traceback" in out and "data.py" in out
    assert sys.modules.get("published_data") is None


def test_keras_2_modules_gone_from_keras_3_and_tensorflow_are_named(tmp_path) -> None:
    # What `from keras.datasets.cifar import load_batch` raises under Keras 3 (without importing
    # TensorFlow here: the conformance suite runs the real imports).
    for module in ("keras.datasets.cifar", "tensorflow.python.keras.datasets"):
        raise_it = f"raise ModuleNotFoundError({f'No module named {module!r}'!r}, name={module!r})"
        data = load(tmp_path, f"def build():\n    {raise_it}\n")
        line = incompatibility.explain(raised(data.build))
        assert line is not None and "\n" not in line, module
        assert line.startswith(f"the model definition imports {module}, ") and line.endswith("(at data.py:2)")
    assert incompatibility.explain(ModuleNotFoundError("No module named 'keras_cv'", name="keras_cv")) is None


def test_verbose_given_to_a_torch_lr_scheduler_is_named_with_what_to_drop(tmp_path) -> None:
    # Determined 0.15 to 0.23's word_language_model: ReduceLROnPlateau(..., verbose=True).
    torch = pytest.importorskip("torch")
    data = load(
        tmp_path,
        "import torch\n\ndef build(opt):\n"
        "    return torch.optim.lr_scheduler.ReduceLROnPlateau(opt, 'min', verbose=True)\n",
    )
    opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    line = incompatibility.explain(raised(lambda: data.build(opt)))
    assert line == (
        "the model definition passes verbose= to torch's ReduceLROnPlateau, which torch's LR schedulers "
        f"no longer take (installed: torch {torch.__version__}); it was written for an older torch: "
        "drop verbose= (log the scheduler's get_last_lr() instead) (at data.py:4)"
    )


def test_an_unexpected_keyword_outside_torch_schedulers_is_left_as_it_is(tmp_path) -> None:
    source = "class Mine:\n    def __init__(self):\n        pass\n\n"
    source += "def build():\n    return Mine(verbose=True)\n"
    data = load(tmp_path, source)
    assert incompatibility.explain(raised(data.build)) is None
