"""Every `determined.*` name that a published example reaches (Determined's `examples/` of nine
releases and the PEDL authors' examples, read unchanged: imports, `from determined... import`, and
attribute chains off them) resolves in pedl's `determined`, or belongs to a feature pedl documents
as missing (README, "Code written for Determined"), listed here with the line a user reads."""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

from published_trees import pedl_examples, releases

from pedl.harness.compat import ensure_determined_importable

ensure_determined_importable()

# Name prefixes of what pedl does not offer -> why (README, "Code written for Determined").
MISSING = {
    "determined.pytorch.dsat": "DeepSpeed autotuning is not supported",
    "determined.pytorch.lightning": "PyTorch Lightning's LightningAdapter is not supported",
    "determined.pytorch.experimental": "det.pytorch.experimental is not supported",
    "determined.pytorch.ClipGradsL2Norm": "0.12's gradient-clipping callbacks are not supported",
    "determined.transformers": "Hugging Face's DetCallback is not supported",
    "determined.horovod": "Horovod is not supported (pedl uses torch.distributed)",
    "determined.tensorpack": "Tensorpack is not supported",
    "determined.experimental.core_v2": "the Core API v2 (unmanaged trials) is not supported",
    "determined.experimental.unmanaged": "unmanaged trials are not supported",
    "determined.experimental.client.": "the SDK's registry and remote lookups",
    "determined.common": "Determined's internal common package",
    "determined.util": "Determined's internal util package",
    "determined.searcher": "custom searchers (det.searcher.SearchRunner) are not supported",
    "determined.keras.DeterminedCallback": "0.38's Keras fit() callback API is not supported",
    "determined.core.DistributedContext.from_tf_config": "TF_CONFIG-based distribution outside the harness",
    # Determined 0.12's Native API (det.experimental.create with hyperparameter objects).
    "determined.Constant": "0.12's Native API",
    "determined.Double": "0.12's Native API",
    "determined.Integer": "0.12's Native API",
    "determined.Log": "0.12's Native API",
    "determined.Categorical": "0.12's Native API",
    "determined.experimental.Mode": "0.12's Native API",
    "determined.experimental.keras": "0.12's Native API",
    "determined.experimental.estimator": "0.12's Native API",
    "determined.keras.TFKerasNativeContext": "0.12's Native API",
    "determined.estimator.EstimatorNativeContext": "0.12's Native API",
    "determined.keras._ArrayLikeAdapter": "0.12's Native API (a private class)",
}


def _sources() -> list[Path]:
    files = [p for examples in releases() for p in examples.rglob("*.py")]
    return files + sorted(pedl_examples().rglob("*.py"))


def _references(path: Path) -> set[str]:
    """Dotted `determined.` names the file imports or reaches through an imported name."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:  # Python 2 files in the oldest trees: no example pedl could run either
        return set()
    found: set[str] = set()
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "determined":
                    found.add(alias.name)
                    aliases[alias.asname or "determined"] = alias.name if alias.asname else "determined"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "determined" or node.module.startswith("determined."):
                for alias in node.names:
                    found.add(f"{node.module}.{alias.name}")
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain: list[str] = []
            inner: ast.expr = node
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in aliases:
                found.add(".".join([aliases[inner.id], *reversed(chain)]))
    return found


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def test_every_name_the_published_examples_reach_resolves_or_is_a_documented_gap() -> None:
    where: dict[str, list[Path]] = defaultdict(list)
    for path in _sources():
        for name in _references(path):
            where[name].append(path)
    assert len(where) > 100  # the trees are all there
    unexplained = sorted(
        name
        for name in where
        if not any(name == p or name.startswith(p if p.endswith(".") else p + ".") for p in MISSING)
        and not _resolves(name)
    )
    assert unexplained == [], {n: [str(p) for p in where[n][:2]] for n in unexplained}
    # Every listed gap is still reached by some example (the list says what is missing, no more).
    unused = [p for p in MISSING if not any(n == p or n.startswith(p.rstrip(".") + ".") for n in where)]
    assert unused == []


def test_what_determineds_package_brings_is_importable_beside_pedls() -> None:
    # Determined's setup.py install_requires: published examples import these without declaring them.
    for module in ("ruamel.yaml", "tabulate", "tqdm", "filelock", "termcolor", "psutil", "requests"):
        importlib.import_module(module)
