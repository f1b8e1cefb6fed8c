"""The Python environment the published examples run in: `scripts/install-torchvision-env`'s
(PyPI's torch with the torchvision built for it, layered over .venv), which `scripts/test`
builds; where it is absent, .venv's own. The suite's agent runs trials with it (`--python`), and
what an example imports is looked up in it, not in the test process."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[3]
_ENVS = _REPO / ".cache" / "envs"


@functools.cache
def python() -> str:
    """The interpreter of the newest installed torchvision environment, else this one."""
    for stamp in sorted(_ENVS.glob("torchvision-*/.installed"), reverse=True):
        candidate = stamp.parent / "bin" / "python"
        if candidate.exists():
            return str(candidate)
    return sys.executable


@functools.cache
def tf_python(name: str) -> str | None:
    """A TensorFlow environment's interpreter (`tf215`: TensorFlow 2.15, `tf212`: 2.12, both Keras 2),
    where the TF Keras examples of the releases whose images the suite maps there run:
    `scripts/build-tf-env` builds it (or finds it built, in seconds); None when it cannot be built
    here (pip cannot fetch that TensorFlow)."""
    version = f"{name[2]}.{name[3:]}"
    try:
        done = subprocess.run(
            [str(_REPO / "scripts" / "build-tf-env"), version], capture_output=True, text=True, timeout=1800
        )
    except subprocess.TimeoutExpired:
        return None
    return done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else None


@functools.cache
def _missing(names: frozenset[str]) -> frozenset[str]:
    probe = (
        "import importlib.util, json, sys\n"
        "print(json.dumps([n for n in json.loads(sys.argv[1]) if importlib.util.find_spec(n) is None]))"
    )
    done = subprocess.run(
        [python(), "-c", probe, json.dumps(sorted(names))], capture_output=True, text=True, check=True
    )
    return frozenset(json.loads(done.stdout))


def missing(names: set[str]) -> set[str]:
    """Those of the top-level modules `names` that the examples' environment cannot import."""
    return set(_missing(frozenset(names)))
