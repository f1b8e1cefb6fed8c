"""Every example of the published trees (Determined's nine releases and the PEDL authors' examples),
with its framework and what the suite does with it: run it unchanged on a local cluster (those whose
data the suite stands in for: the iris CSVs their config's `data.train_url`/`test_url` name), or the
reason it is not run. `published_table()` is the README's table.

The MNIST examples (`data.url` of `pytorch_mnist.tar.gz`, or torchvision's download into `data/`)
have stand-in data too (`standin_data.py`); they need torchvision, which the examples' environment
(`example_env`: PyPI's torch and torchvision beside .venv, under DeepSpeed's) provides. The CIFAR-10
examples that read `data.url`'s `cifar-10-python.tar.gz` with Keras's `load_batch` get a full-size
stand-in too, and so do the Titanic boosted trees (`data.titanic_dataset`'s CSVs), Determined's
MNIST Estimators (TFRecords in a bind mount at `/tmp/data-rank0`, in TensorFlow 2.15's environment)
and PEDL 0.11's `mnist_tf_keras` (Fashion-MNIST under `KERAS_HOME`). An example without a stand-in
says why none can serve it (`_NO_STANDIN`), and one stopped before its data says by what
(`_BLOCKERS`).
The Core API tutorials (a folder of stage scripts, each with its own config) are listed one
example per config; the MNIST one reads torchvision's MNIST from `../data`, the word language model
WikiText-2 from its bind mount, and 0.38's iris_tf_keras fetches hard-coded `http://` URLs: the
suite stands in for those too (test_published_runs: `standin_for`, the server as `http_proxy`).

Determined's DeepSpeed examples (`deepspeed/`, `deepspeed_autotune/`) carry no const.yaml: each of
their configs is one example. They run in the examples' environment, which is DeepSpeed's
(`scripts/install-deepspeed-env`, over torchvision's) and has attrdict3 for the `attrdict` module
those before 0.38 import; what else they import is looked up as for the others. 0.38's DCGAN (a
det_ds.Trainer script) reads torchvision's MNIST from its bind mount (`mnist-mount`)."""

from __future__ import annotations

import functools
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml
from example_env import missing as missing_modules
from published_trees import pedl_examples, releases
from standin_data import CIFAR_URL, MNIST_TFRECORDS

MNIST_URL = "pytorch_mnist.tar.gz"
_IRIS_HTTP = "http://download.tensorflow.org/data/iris_training.csv"
# Run by `scripts/test` (the smoke part): one per generation of Determined's trial API (0.12's
# PyTorchTrial, 0.38's PyTorchTrial under `pytorch.Trainer`, TFKerasTrial, a Core API script), and
# PEDL 0.11's.
SMOKE = {
    ("0.12.13", "official/trial/mnist_pytorch"),
    ("0.38.1", "tutorials/mnist_pytorch"),
    ("0.23.4", "computer_vision/iris_tf_keras"),  # in TensorFlow 2.15's environment, which CI prebuilds
    ("0.38.1", "tutorials/core_api/3_hpsearch"),
    ("pedl-0.11", "mnist_pytorch"),
}
CLUSTER_SLOTS = 2  # the suite's one agent's
# Scripts whose length is in their code, not their config (test mode cannot cut it): their batches.
# 0.38's DCGAN: `trainer.fit(max_length=pytorch.Batch(200))`.
SCRIPT_BATCHES = {("0.38.1", "deepspeed/dcgan/mnist"): 200}
# The image a Determined release's TF Keras examples ran in (a TF 2 one named in that release's own
# tree; 0.26 to 0.34 name none, and their code, with tf.keras.optimizers.legacy, is TF 2.11's), set
# where the config names none, as the release's master did (its task_container_defaults). The
# suite's scheduler maps the images of TF 2.11 to 2.15 (Keras 2 with the optimizers of 2.15) to
# TensorFlow 2.15's environment, older ones (TF 2.2 to 2.8) to TensorFlow 2.12's, the oldest with
# wheels for Python 3.11, whose Keras 2.12 still has `keras.datasets.cifar` (`IMAGE_RULES`,
# scripts/build-tf-env). Their `RMSprop(lr=..., decay=...)` gets the optimizer TF 2.10 had
# (pedl.keras._keras2). `tensorflow.python.keras.datasets`, which 0.12 and 0.15's CIFAR-10 examples
# import (their images' TF 2.2 and 2.4 had it; it last shipped in TF 2.7, which has no wheel for
# Python 3.11), is an import alias there of Keras 2.12's `keras.datasets`, the same code TF moved out
# (scripts/tf-env/pedl_tf_keras_datasets.py, installed into that environment alone).
_TF_2_11 = "determinedai/environments:cuda-11.3-pytorch-1.12-tf-2.11-gpu-6eceaca"
KERAS2_IMAGES = {
    "0.12.13": "determinedai/environments:cuda-10.1-pytorch-1.4-tf-2.2-gpu-23863bb",
    "0.15.6": "determinedai/environments:py-3.7-pytorch-1.7-lightning-1.2-tf-2.4-cpu-0.14.0",
    "0.17.15": "determinedai/environments:py-3.8-pytorch-1.10-lightning-1.5-tf-2.8-cpu-0.17.15",
    "0.20.1": "determinedai/environments:py-3.8-pytorch-1.12-tf-2.8-cpu-0.20.1",
    **dict.fromkeys(("0.23.4", "0.26.7", "0.30.0", "0.34.0"), _TF_2_11),
}
# The image Determined 0.12's PyTorch examples ran in (its default CPU image, as its tree names it:
# PyTorch 1.4 with a NumPy older than 1.24, which still had np.int), set where the config names
# none. The suite maps it to `numpy1` (NumPy 1.23.5 beside torch 2.14.1: scripts/install-numpy1-env).
# Later releases' PyTorch examples run in the default environment: their code needs no older NumPy.
PYTORCH_IMAGES = {"0.12.13": "determinedai/environments:py-3.6.9-pytorch-1.4-tf-1.15-cpu-0.5.0"}
# Examples whose code needs torch before 2.7 (0.15 to 0.23's word language model passes verbose= to
# ReduceLROnPlateau, which torch 2.7 removed), run in torch 2.6's environment (`torch26`:
# scripts/install-torch26-env, 5.2 GB, built only when one of them is run): their test-mode config
# names it (`environment.name`), as a pedl user would. Not by image: their release's one image held
# TensorFlow too, and its TF Keras examples run elsewhere.
OLDER_TORCH = {(r, "nlp/word_language_model"): "torch26" for r in ("0.15.6", "0.17.15", "0.20.1", "0.23.4")}
# PEDL 0.11's Keras examples import modules of Keras <= 2.12 (`keras.utils.data_utils`,
# `keras.datasets.cifar`), and its tree names no image (no config has one) that the scheduler could
# map: the test-mode config of the one with stand-in data names TensorFlow 2.12's environment, as a
# pedl user would. Its trial class (an uncompiled model, optimizer()/loss()/metric methods) runs on
# pedl's Keras controller (pedl.keras._compile).
OLDER_KERAS = {("pedl-0.11", "cifar10_cnn_keras"): "tf212"}
# Estimator examples need `tf.estimator` (gone since TensorFlow 2.16): their test-mode config names
# TensorFlow 2.15's environment, as README tells a pedl user to (their images are TF 1.15's, which
# no environment stands in for, or TF 2.8's).
ESTIMATOR_ENVIRONMENT = "tf215"
# The suite's scheduler's --image-environment rules; 0.34's iris_tf_keras names NVIDIA's TensorFlow
# image of its release (its code needs Keras 2's legacy optimizers: TF <= 2.15).
IMAGE_RULES = (
    "*tf-2.1[1-5]-*=tf215",
    "determinedai/tensorflow-ngc:*=tf215",
    "*tf-2.[2-8]-*=tf212",
    "*-pytorch-1.4-tf-1.15-*=numpy1",
)
# Examples that run but do not complete: how their one-line cause (pedl.harness.incompatibility), or
# the one line refusing their config, begins; what follows names the installed version and the
# model definition's line.
FAILS: dict[tuple[str, str], str] = {
    # The Titanic boosted trees build `tf.estimator.BoostedTreesClassifier`, which TensorFlow's
    # Estimator no longer has in 2.12 or 2.15 (the environments with `tf.estimator`; checked in both).
    **dict.fromkeys(
        [
            ("0.12.13", "experimental/trial/gbt_estimator"),
            *[(r, "decision_trees/gbt_titanic_estimator") for r in ("0.15.6", "0.17.15", "0.20.1")],
        ],
        "failed: AttributeError: module 'tensorflow_estimator.python.estimator.api._v2.estimator' has no "
        "attribute 'BoostedTreesClassifier'",
    ),
    # 0.20 to 0.34's Core API MNIST `metrics` and `checkpoints` stages report `test_loss` under
    # `metric: val_loss` and never ask the searcher: as in Determined they run to their own end and
    # complete (the searcher hears only op.report_completed). Its ASHA stage's `load_state` uses
    # `pathlib` without importing it (0.23 added the import): a trial resumed from its checkpoint
    # (a late ASHA promotion; in Determined, that or a pause and resume) dies of a NameError.
    ("0.20.1", "tutorials/core_api_pytorch_mnist/adaptive"): (
        "failed: the entrypoint 'python3 model_def_adaptive.py' exited with code 1: NameError: name "
        "'pathlib' is not defined (at model_def_adaptive.py:112)"
    ),
}
# Top-level imports that are the examples' own or the standard library's are not dependencies.
_STDLIB_LIKE = {"__future__", "determined", "pedl"}
_IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_][\w]*)", re.MULTILINE)


@dataclass(frozen=True)
class Example:
    release: str  # "0.12.13" ... or "pedl-0.11"
    name: str  # its folder under the release's examples/
    folder: Path
    framework: str
    # "iris-url", "iris-proxy" (its code's http:// URLs, answered by the suite as HTTP proxy),
    # "mnist-url", "mnist-dir", "mnist-parent" (torchvision's MNIST in `../data`),
    # "cifar-url", "wikitext-mount" (WikiText-2 in the folder its bind_mounts entry mounts),
    # "mnist-mount" (torchvision's MNIST under `data.dataroot`, a bind mount's container_path), "none"
    # (needs none), "titanic-url" (the Titanic CSVs its config's `data.titanic_dataset` names),
    # "tfrecord-mount" (MNIST TFRecords in `/tmp/data-rank0`, a bind mount the suite adds),
    # "fashion-keras-home" (Keras's Fashion-MNIST under `$KERAS_HOME`, a bind mount the suite adds),
    # "" (no stand-in)
    data: str
    missing: tuple[str, ...]  # libraries it imports that the examples' environment lacks
    config: str = "const.yaml"  # the experiment config submitted
    slots: int = 1  # its resources.slots_per_trial
    image: str = ""  # the Determined image it ran in, where the suite sets one (*_IMAGES)
    # the agents' environment its test-mode config names (OLDER_TORCH, OLDER_KERAS, ESTIMATOR_ENVIRONMENT)
    environment: str = ""
    # What stops it other than data (one line): a Determined feature pedl does not offer, the
    # example's own bug, an API no installable library has (`_BLOCKERS`, `_NO_DSAT`)
    unsupported: str = ""
    no_data: str = ""  # where `data` is "": why no stand-in serves it (`_NO_STANDIN`)

    @property
    def expected(self) -> str:
        """Its result when run: completes, or how it fails (`FAILS`, with why in parentheses)."""
        return FAILS.get((self.release, self.name), "completes")

    def matches(self, result: str) -> bool:
        """Whether a run's result is the expected one (a failure's line as far as `FAILS` has it)."""
        expected = self.expected
        return result == expected or (expected != "completes" and result.startswith(expected))

    @property
    def runs(self) -> bool:
        return not self.reason

    @property
    def reason(self) -> str:
        """Why it is not run ("" when it is)."""
        if self.framework in _UNSUPPORTED:
            return _UNSUPPORTED[self.framework]
        if self.missing:
            why = f"needs {', '.join(self.missing)}, not in pedl's environment"
            return why + (_ATTRDICT if "attrdict" in self.missing else "")
        if self.unsupported:
            return self.unsupported
        if self.slots > CLUSTER_SLOTS:
            return f"asks more slots per trial than the suite's cluster has ({CLUSTER_SLOTS})"
        if not self.data:
            return self.no_data or "downloads a data set the suite has no stand-in for"
        return ""


_ATTRDICT = (
    " (attrdict 2.0.1 fails at import on Python 3.10+: cannot import name 'Mapping' from 'collections')"
)
_UNSUPPORTED = {
    "PyTorch Lightning": "PyTorch Lightning's adapter: not offered by pedl",
}
# Determined's DeepSpeed autotuning (its `deepspeed_autotune` examples), listed as missing in README.
_DSAT = re.compile(r"from determined\.pytorch import [^\n]*\bdsat\b|determined\.pytorch\.dsat")
_NO_DSAT = "DeepSpeed autotuning (determined.pytorch.dsat): not offered by pedl"
# What stops an example before its data does, by a mark in its code (the first that matches).
_BLOCKERS = (
    (
        re.compile(r"\bcache_(train|validation)_dataset\b"),
        "Determined's data layer (context.experimental.cache_train_dataset): not offered by pedl",
    ),
    (
        re.compile(r"\bdetermined\.util\b"),
        "determined.util (download_gcs_blob_with_backoff): not offered by pedl",
    ),
    (
        re.compile(r"get_hparam\(\s*\"workers\",\s*pin_memory"),
        'its own bug: get_hparam("workers", pin_memory=True) raises TypeError (in Determined too)',
    ),
    (
        re.compile(r"\btf\.gfile\.|\btf\.train\.AdamOptimizer\b"),
        "TensorFlow 1's API (tf.gfile, tf.train.AdamOptimizer): no TensorFlow 1 for Python 3.11",
    ),
)
# Why the examples whose data the suite does not stand in for cannot have one, by a mark in their code.
_HASHED = "its loader checks the downloaded file's hash ({}), which no stand-in passes"
_NO_STANDIN = (
    (re.compile(r"\bCIFAR10\("), _HASHED.format("torchvision CIFAR-10: MD5")),
    (re.compile(r"\bcifar10\.load_data\("), _HASHED.format("Keras CIFAR-10: SHA-256")),
    (re.compile(r"\bmnist\.load_data\("), _HASHED.format("Keras MNIST: SHA-256")),
    (re.compile(r"imdb\.npz"), _HASHED.format("Keras IMDB: MD5")),
    (
        re.compile(r"get_file\([^)]*cache_subdir=download_directory"),
        "fetches its data over HTTPS into a new temporary folder (Keras get_file): no stand-in can be placed",
    ),
    (
        re.compile(r"fasterrcnn_resnet50_fpn\(\s*pretrained=True"),
        "fetches pretrained Faster R-CNN weights over HTTPS (torch.hub), which the suite has no stand-in for",
    ),
)


def _first(marks: tuple[tuple[re.Pattern[str], str], ...], sources: str) -> str:
    return next((why for mark, why in marks if mark.search(sources)), "")


def _framework(sources: str) -> str:
    checks = (
        ("DeepSpeed", ("deepspeed",)),
        ("PyTorch Lightning", ("pytorch_lightning", "LightningAdapter")),
        ("Estimator", ("EstimatorTrial", "determined.estimator", "pedl.frameworks.tensorflow.estimator")),
        ("TF Keras", ("TFKerasTrial", "determined.keras", "KerasTrial", "tensorflow.keras", "from keras")),
        ("PyTorch", ("PyTorchTrial", "determined.pytorch", "pedl.frameworks.pytorch", "pytorch.Trainer")),
        ("TensorFlow", ("TensorFlowTrial", "import tensorflow")),
        ("Core API", ("core.init", "determined.core")),
    )
    for name, marks in checks:
        if any(mark in sources for mark in marks):
            return name
    return "other"


def _imports(folder: Path, sources: str) -> set[str]:
    """The top-level modules the example imports that are not its own or the standard library."""
    local = {p.stem for p in folder.rglob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
    wanted = {m for m in _IMPORT.findall(sources) if m not in local and m not in _STDLIB_LIKE}
    return {m for m in wanted if m not in sys.stdlib_module_names}


def _data(folder: Path, sources: str, config: str) -> str:
    if _is_stage(folder, config):
        # torchvision's MNIST read from the trial's `../data`: its files present, it downloads
        # nothing and checks no hash.
        if 'datasets.MNIST("../data"' in sources:
            return "mnist-parent"
        return "" if re.search(r"datasets\.|download|https?://", sources) else "none"
    const = yaml.safe_load((folder / config).read_text()) or {}
    data = const.get("data") if isinstance(const.get("data"), dict) else {}
    if str(data.get("train_url", "")).endswith("iris_training.csv"):
        return "iris-url"
    configs = " ".join(p.read_text(errors="replace") for p in folder.glob("*.yaml"))
    if MNIST_URL in configs:
        return "mnist-url"
    if "datasets.MNIST(" in sources and 'Path("data")' in sources:
        return "mnist-dir"
    if "dset.MNIST(" in sources and data.get("dataset") == "mnist" and _mounted(const, data.get("dataroot")):
        return "mnist-mount"
    # Hard-coded in the code: plain-HTTP URLs the suite answers as the trial's HTTP proxy.
    if _IRIS_HTTP in sources:
        return "iris-proxy"
    # Outside the model folder: WikiText-2 in the host folder its bind mount names.
    if "wikitext-2-v1.zip" in sources and const.get("bind_mounts") and data.get("bind_mount_path"):
        return "wikitext-mount"
    # Those reading the URL's batches themselves (torchvision's CIFAR10 checks MD5 sums, Keras's
    # cifar10.load_data its own URL's hash: no stand-in passes either).
    if CIFAR_URL in configs and "load_batch" in sources:
        return "cifar-url"
    if isinstance(data.get("titanic_dataset"), dict):
        return "titanic-url"
    # Its download skipped where the tarball is already in its `/tmp/data-rank<N>` (then it reads
    # the unpacked TFRecords beside it).
    if MNIST_TFRECORDS in sources and "/tmp/data-rank" in sources:
        return "tfrecord-mount"
    # Keras's own loader, which checks no hash for Fashion-MNIST, in its cache under $KERAS_HOME.
    if re.search(r"keras\.datasets\.fashion_mnist\b", sources) and "fashion_mnist.load_data()" in sources:
        return "fashion-keras-home"
    return ""


def _mounted(config: dict, path: object) -> bool:
    """Whether `path` is the container_path of one of the config's bind mounts."""
    mounts = config.get("bind_mounts") if isinstance(config.get("bind_mounts"), list) else []
    return bool(path) and any(isinstance(m, dict) and m.get("container_path") == path for m in mounts)


def _sources(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.rglob("*.py")))


def _example(release: str, name: str, folder: Path, config: str, absent: set[str]) -> Example:
    if not _is_stage(folder, config):
        sources = _sources(folder)
        framework = _framework(sources)
    else:  # a plain script becomes a Core API one stage by stage
        sources = _stage_script(folder, config)
        framework = "Core API" if "core.init" in sources else "other"
    # What imports DeepSpeed runs in DeepSpeed's environment: only its other imports can be missing.
    needs = tuple(sorted(_imports(folder, sources) & absent - {"deepspeed"}))
    raw = yaml.safe_load((folder / config).read_text())
    resources = raw.get("resources") if isinstance(raw.get("resources"), dict) else {}
    slots = int(resources.get("slots_per_trial") or 1)
    data = _data(folder, sources, config)
    images = {"TF Keras": KERAS2_IMAGES, "PyTorch": PYTORCH_IMAGES}.get(framework, {})
    image = images.get(release, "")
    environment = OLDER_TORCH.get((release, name)) or OLDER_KERAS.get((release, name), "")
    environment = environment or (ESTIMATOR_ENVIRONMENT if framework == "Estimator" else "")
    unsupported = _NO_DSAT if _DSAT.search(sources) else _first(_BLOCKERS, sources)
    no_data = "" if data else _first(_NO_STANDIN, sources)
    return Example(
        release, name, folder, framework, data, needs, config, slots, image, environment, unsupported, no_data
    )


def _stage_script(folder: Path, config: str) -> str:
    """The source of the script a Core API tutorial stage's entrypoint runs (`python3 N_stage.py`)."""
    entrypoint = str(yaml.safe_load((folder / config).read_text())["entrypoint"])
    scripts = [folder / word for word in entrypoint.split() if word.endswith(".py")]
    return "\n".join(p.read_text(errors="replace") for p in scripts if p.is_file())


def _is_stage(folder: Path, config: str) -> bool:
    """Whether `config` is one stage of a Core API tutorial (`core_api`, `core_api_pytorch_mnist`:
    a folder of scripts, each config running one): its own script is what it runs."""
    return folder.name.startswith("core_api")


def _stage_configs(folder: Path) -> list[str]:
    """A Core API tutorial's configs besides a const.yaml (each names a script as entrypoint)."""
    if not folder.name.startswith("core_api"):
        return []
    found = []
    for config in sorted(folder.glob("*.yaml")):
        raw = yaml.safe_load(config.read_text())
        if config.name != "const.yaml" and isinstance(raw, dict) and "entrypoint" in raw:
            found.append(config.name)
    return found


def _deepspeed_configs(folder: Path) -> list[str]:
    """A DeepSpeed example folder's configs (it has no const.yaml: each config with an entrypoint is
    one example), or none for any other folder."""
    if (folder / "const.yaml").exists() or _framework(_sources(folder)) != "DeepSpeed":
        return []
    found = []
    for config in sorted(folder.glob("*.yaml")):
        raw = yaml.safe_load(config.read_text())
        if isinstance(raw, dict) and "entrypoint" in raw:
            found.append(config.name)
    return found


def _is_example(folder: Path) -> bool:
    const = folder / "const.yaml"
    if not const.is_file():
        return False
    try:
        raw = yaml.safe_load(const.read_text())
    except yaml.YAMLError:
        return False
    return isinstance(raw, dict) and (
        "entrypoint" in raw or "entrypoints" in raw or (folder / "__init__.py").exists()
    )


@functools.cache
def examples() -> list[Example]:
    """Each published example with a const.yaml (and each Core API tutorial stage), releases oldest
    first, then PEDL 0.11's."""
    places: list[tuple[str, str, Path, str]] = []
    roots = [(root.parent.name.lstrip("v"), root) for root in releases()]
    for release, root in [*roots, ("pedl-0.11", pedl_examples())]:
        deepspeed = {c.parent for c in root.glob("deepspeed*/**/*.yaml")}
        folders = sorted(
            {c.parent for c in root.rglob("const.yaml")} | set(root.rglob("core_api")) | deepspeed
        )
        for folder in folders:
            name = folder.relative_to(root).as_posix()
            if _is_example(folder):
                places.append((release, name, folder, "const.yaml"))
            for config in _stage_configs(folder) or _deepspeed_configs(folder):
                places.append((release, f"{name}/{Path(config).stem}", folder, config))
    wanted = set().union(*(_imports(f, _sources(f)) for f in {p[2] for p in places}))
    absent = missing_modules(wanted)
    return [_example(release, name, folder, config, absent) for release, name, folder, config in places]


def published_table(results: dict[tuple[str, str], str] | None = None) -> str:
    """The README's table: per release, the examples by framework and how many run; then each example
    run, with its result (`results`, else what the suite asserts: `Example.expected`)."""
    every = examples()
    lines = [
        "| release | examples | by framework | run on a local cluster | not run: why (count) |",
        "|---|---|---|---|---|",
    ]
    for release in dict.fromkeys(e.release for e in every):
        mine = [e for e in every if e.release == release]
        frameworks = ", ".join(f"{k} {v}" for k, v in sorted(Counter(e.framework for e in mine).items()))
        reasons = Counter(_reason_kind(e.reason) for e in mine if not e.runs)
        why = "; ".join(f"{k} ({v})" for k, v in sorted(reasons.items()))
        lines.append(f"| {release} | {len(mine)} | {frameworks} | {sum(e.runs for e in mine)} | {why} |")
    lines += ["", "| release | example | framework | result |", "|---|---|---|---|"]
    for e in every:
        if e.runs:
            result = (results or {}).get((e.release, e.name), e.expected)
            result += " …" if result.startswith(("failed:", "refused:")) and not results else ""
            smoke = " (smoke)" if (e.release, e.name) in SMOKE else ""
            lines.append(f"| {e.release} | `{e.name}` | {e.framework} | {result}{smoke} |")
    return "\n".join(lines) + "\n"


def _reason_kind(reason: str) -> str:
    """Reasons grouped for the summary: libraries are named, data sets counted together."""
    return (
        reason.split(",")[0].replace(" not in pedl's environment", "")
        if reason.startswith("needs")
        else reason
    )
