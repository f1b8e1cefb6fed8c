"""The Python environment the published examples run in: `scripts/install-deepspeed-env`'s
(DeepSpeed and attrdict3 over `scripts/install-torchvision-env`'s PyPI torch and torchvision, over
.venv), which `scripts/test` builds; where it is absent, the torchvision environment alone, else
.venv's own. One environment for all, as DeepSpeed's holds everything the torchvision one does
(Determined 0.38's DCGAN imports both). The suite's agent runs trials with it (`--python`), and
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
    """The interpreter of the newest installed DeepSpeed environment built over torchvision's, else
    of the newest torchvision environment, else this one."""
    deepspeed = [s for s in _ENVS.glob("deepspeed-*/.installed") if "torchvision" in s.read_text()]
    vision = _ENVS.glob("torchvision-*/.installed")
    for stamp in [*sorted(deepspeed, reverse=True), *sorted(vision, reverse=True)]:
        candidate = stamp.parent / "bin" / "python"
        if candidate.exists():
            return str(candidate)
    return sys.executable


# The agents' environments the suite's image rules (catalogue.IMAGE_RULES) name, by the script that
# builds each (or finds it built, in seconds) and prints its interpreter: TensorFlow 2.15's (Keras 2),
# where the TF Keras examples of releases that shipped Keras 2 run, and 2.12's (the oldest with a
# Python 3.11 wheel; Keras 2.12 still has keras.datasets.cifar), where those of releases whose images
# held TensorFlow 2.2-2.8 run; NumPy 1.23's beside torch, where
# Determined 0.12's PyTorch examples run (their code uses np.int); and torch 2.6's, which the configs
# of examples whose code needs torch before 2.7 name (catalogue.OLDER_TORCH).
BUILDERS = {
    "tf215": ("build-tf-env", "2.15"),
    "tf212": ("build-tf-env", "2.12"),
    "numpy1": ("install-numpy1-env",),
    "torch26": ("install-torch26-env",),
}


@functools.cache
def built_python(name: str) -> str | None:
    """The interpreter of the environment `name` (`BUILDERS`), built here if needed; None when it
    cannot be built here (pip cannot fetch what it needs)."""
    try:
        done = subprocess.run(
            [str(_REPO / "scripts" / BUILDERS[name][0]), *BUILDERS[name][1:]],
            capture_output=True,
            text=True,
            timeout=1800,
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
