"""TensorFlow 2.12's environment (`scripts/build-tf-env 2.12`) answers `tensorflow.python.keras.datasets`
with Keras 2.12's `keras.datasets`, as the TF 2.2-2.7 images Determined 0.12 and 0.15's CIFAR-10
examples ran in had it; a name outside the mapping still fails with the harness's one line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ALIAS_FILE = ROOT / "scripts" / "tf-env" / "pedl_tf_keras_datasets.py"
TF212 = ROOT / ".cache" / "envs" / "tf212"
# What TF 2.7's tensorflow/python/keras/datasets held.
NAMES = ["boston_housing", "cifar", "cifar10", "cifar100", "fashion_mnist", "imdb", "mnist", "reuters"]


def alias_module():
    spec = importlib.util.spec_from_file_location("pedl_tf_keras_datasets_under_test", ALIAS_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines the finder; only install() registers it
    return module


def test_the_mapping_covers_tensorflow_2_7s_datasets_and_nothing_else() -> None:
    alias = alias_module()
    assert alias.target_of("tensorflow.python.keras.datasets") == "keras.datasets"
    assert sorted(alias.SUBMODULES) == NAMES
    for name in NAMES:
        assert alias.target_of(f"tensorflow.python.keras.datasets.{name}") == f"keras.datasets.{name}"
    for other in ("tensorflow.python.keras.datasets.svhn", "tensorflow.python.keras", "keras.datasets.cifar"):
        assert alias.target_of(other) is None, other


# Run in the tf212 environment: the example's imports, load_batch on a batch file laid out as
# CIFAR-10's python pickles are, then a model definition importing a dataset TF never had.
IN_TF212 = """
import importlib.util, inspect, json, pickle, sys
import numpy as np
import keras.datasets
from tensorflow.python.keras.datasets.cifar import load_batch
from tensorflow.python.keras.utils.data_utils import Sequence
from pedl.harness import incompatibility
folder, names = sys.argv[1], json.loads(sys.argv[2])
old = "tensorflow.python.keras.datasets."
same = [importlib.import_module(old + n) is getattr(keras.datasets, n) for n in names]
with open(folder + "/data_batch_1", "wb") as f:
    pickle.dump({b"data": np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072), b"labels": [3, 7]}, f)
data, labels = load_batch(folder + "/data_batch_1")
with open(folder + "/data.py", "w") as f:
    f.write("def build():\\n    import tensorflow.python.keras.datasets.svhn\\n")
spec = importlib.util.spec_from_file_location("published_data", folder + "/data.py")
model_def = importlib.util.module_from_spec(spec)
spec.loader.exec_module(model_def)
try:
    model_def.build()
    line = None
except ModuleNotFoundError as exc:
    line = incompatibility.explain(exc)
print(json.dumps({
    "same": same, "signature": str(inspect.signature(load_batch)), "shape": list(data.shape),
    "dtype": str(data.dtype), "labels": list(labels), "first": int(data[1, 0, 0, 0]), "line": line,
}))
"""


@pytest.mark.timeout(300)
def test_tensorflow_2_12s_environment_imports_the_old_names_and_refuses_others_in_one_line(tmp_path) -> None:
    python = TF212 / "bin" / "python"
    if not python.exists() or not (TF212 / ".pedl-tf212-installed").exists():
        pytest.skip("TensorFlow 2.12's environment is not built (scripts/build-tf-env 2.12)")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [str(python), "-c", IN_TF212, str(tmp_path), json.dumps(NAMES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["same"] == [True] * len(NAMES)
    # What TF 2.7's load_batch took and gave: (fpath, label_key="labels") -> (N, 3, 32, 32) uint8, labels.
    assert seen["signature"] == "(fpath, label_key='labels')"
    assert (seen["shape"], seen["dtype"], seen["labels"]) == ([2, 3, 32, 32], "uint8", [3, 7])
    assert seen["first"] == 3072 % 256
    line = seen["line"]
    assert line is not None and "\n" not in line
    assert line.startswith(
        "the model definition imports tensorflow.python.keras.datasets.svhn, TensorFlow's internal copy of "
        "Keras 2, which the installed TensorFlow 2.12.1 does not have"
    )
    assert line.endswith("(at data.py:2)")
