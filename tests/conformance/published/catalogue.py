"""Every example of the published trees (Determined's nine releases and the PEDL authors' examples),
with its framework and what the suite does with it: run it unchanged on a local cluster (those whose
data the suite stands in for: the iris CSVs their config's `data.train_url`/`test_url` name), or the
reason it is not run. `published_table()` is the README's table.

The MNIST examples (`data.url` of `pytorch_mnist.tar.gz`, or torchvision's download into `data/`)
have stand-in data too (`standin_data.py`), but they need torchvision, which this environment lacks
(PyPI's torchvision wheels are built against CUDA torch, and pedl's is the CPU build): they are listed
as needing it, and run wherever it is installed (its `datasets.MNIST` then finds the stand-in)."""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml
from published_trees import pedl_examples, releases

MNIST_URL = "pytorch_mnist.tar.gz"
# Run by `scripts/test` (the smoke part): one per generation of Determined's trial API, and PEDL 0.11's.
SMOKE = {
    ("0.12.13", "official/trial/iris_tf_keras"),
    ("pedl-0.11", "iris_tf_keras"),
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
    data: str  # "iris-url", "mnist-url", "mnist-dir", or "" (no stand-in)
    missing: tuple[str, ...]  # libraries it imports that this environment lacks
    histograms: bool = False  # asks Keras's TensorBoard callback for weight histograms

    @property
    def expected(self) -> str:
        """Its result when run: completes, or the one line it stops with (a feature pedl lacks)."""
        return HISTOGRAMS if self.histograms else "completes"

    @property
    def runs(self) -> bool:
        return bool(self.data) and not self.missing and self.framework not in _UNSUPPORTED

    @property
    def reason(self) -> str:
        """Why it is not run ("" when it is)."""
        if self.framework in _UNSUPPORTED:
            return _UNSUPPORTED[self.framework]
        if self.missing:
            return f"needs {', '.join(self.missing)}, not in pedl's environment"
        if not self.data:
            return "downloads a data set the suite has no stand-in for"
        return ""


# What a trial asking Keras's TensorBoard callback for histograms stops with, at its start.
HISTOGRAMS = (
    "stops at its start in one line: TensorBoard(histogram_freq=1): pedl's TensorBoard has no histograms"
)
_UNSUPPORTED = {
    "DeepSpeed": "DeepSpeed: refused in one line (README: not supported by pedl)",
    "PyTorch Lightning": "PyTorch Lightning's adapter: not offered by pedl",
}


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


def _missing(folder: Path, sources: str) -> tuple[str, ...]:
    local = {p.stem for p in folder.rglob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
    wanted = {m for m in _IMPORT.findall(sources) if m not in local and m not in _STDLIB_LIKE}
    return tuple(sorted(m for m in wanted if importlib.util.find_spec(m) is None))


def _data(folder: Path, sources: str) -> str:
    const = yaml.safe_load((folder / "const.yaml").read_text()) or {}
    data = const.get("data") if isinstance(const.get("data"), dict) else {}
    if str(data.get("train_url", "")).endswith("iris_training.csv"):
        return "iris-url"
    configs = " ".join(p.read_text(errors="replace") for p in folder.glob("*.yaml"))
    if MNIST_URL in configs:
        return "mnist-url"
    if "datasets.MNIST(" in sources and 'Path("data")' in sources:
        return "mnist-dir"
    return ""


def _example(release: str, name: str, folder: Path) -> Example:
    sources = "\n".join(p.read_text(errors="replace") for p in sorted(folder.rglob("*.py")))
    histograms = re.search(r"histogram_freq\s*=\s*[1-9]", sources) is not None
    return Example(
        release,
        name,
        folder,
        _framework(sources),
        _data(folder, sources),
        _missing(folder, sources),
        histograms,
    )


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


def examples() -> list[Example]:
    """Each published example with a const.yaml, releases oldest first, then PEDL 0.11's."""
    found = []
    for root in releases():
        release = root.parent.name.lstrip("v")
        for const in sorted(root.rglob("const.yaml")):
            if _is_example(const.parent):
                found.append(_example(release, const.parent.relative_to(root).as_posix(), const.parent))
    root = pedl_examples()
    for const in sorted(root.rglob("const.yaml")):
        if _is_example(const.parent):
            found.append(_example("pedl-0.11", const.parent.relative_to(root).as_posix(), const.parent))
    return found


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
