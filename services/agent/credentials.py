"""What a harness may hold: an environment built from an allow-list, and its own trial's token only.

Nothing is inherited from the agent by default: the agent's environment may hold the cluster secret,
cloud keys or proxy passwords, and a trial must see none of them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

from pedl import auth

# Passed on as they are: what programs need to find themselves, their locale and their CA bundles.
ALLOWED = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "USER",
        "LOGNAME",
        "LD_LIBRARY_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "AWS_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "VIRTUAL_ENV",
        auth.ENV_TLS_CA,
    }
)
# Passed on by prefix: Python, threading and math libraries, CUDA, NCCL, gloo, torch and TensorFlow
# settings (TF_CONFIG and the rank variables are set by the agent per rank, never inherited).
ALLOWED_PREFIXES = (
    "LC_",
    "PYTHON",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",
    "CUDA_",
    "NVIDIA_",
    "NCCL_",
    "GLOO_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "TF_",
    "XLA_",
)


def harness_environment(environ: Mapping[str, str], home: Path, excluded: Collection[str]) -> dict[str, str]:
    """The allow-listed part of the agent's `environ` (less `excluded`), with HOME set to `home`."""
    env = {
        k: v
        for k, v in environ.items()
        if (k in ALLOWED or k.startswith(ALLOWED_PREFIXES)) and k not in excluded
    }
    env["HOME"] = str(home)
    return env


def harness_credentials(env: dict[str, str], checkpoint_token: str) -> None:
    """Edits a harness's environment in place: PEDL_TOKEN is the trial's token (or absent)."""
    env.pop(auth.ENV_CLUSTER_SECRET, None)
    env.pop(auth.ENV_TOKEN, None)
    if checkpoint_token:
        env[auth.ENV_TOKEN] = checkpoint_token
