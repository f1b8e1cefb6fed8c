"""The running trial's hyperparameters and data directory, reachable from anywhere in user code.

The harness installs them once per process before the user's model definition runs, so
`pedl.get_hyperparameter` works in module-level code as well as inside a Trial.
"""

from __future__ import annotations

from typing import Any

_hparams: dict[str, Any] | None = None
_download_data_dir: str | None = None


def set_hyperparameters(hparams: dict[str, Any] | None) -> None:
    global _hparams
    _hparams = None if hparams is None else dict(hparams)


def set_download_data_dir(path: str | None) -> None:
    global _download_data_dir
    _download_data_dir = path


def get_hyperparameter(name: str) -> Any:
    """The value of hyperparameter `name` in the running trial's sample."""
    if _hparams is None:
        raise RuntimeError("pedl.get_hyperparameter() was called outside a running trial")
    if name not in _hparams:
        known = ", ".join(sorted(_hparams)) or "(none)"
        raise KeyError(f"unknown hyperparameter {name!r}; the experiment defines: {known}")
    return _hparams[name]


def get_download_data_dir() -> str:
    """The directory `download_data()` returned on this machine."""
    if _download_data_dir is None:
        raise RuntimeError(
            "pedl.get_download_data_dir() has no value: the model definition has no download_data() "
            "or it has not run yet"
        )
    return _download_data_dir


_trial_seed: int | None = None
_experiment_config: dict[str, Any] | None = None


def set_trial_seed(seed: int | None) -> None:
    global _trial_seed
    _trial_seed = seed


def set_experiment_config(config: dict[str, Any] | None) -> None:
    global _experiment_config
    _experiment_config = None if config is None else dict(config)


def get_trial_seed() -> int:
    """The seed PEDL drew for this trial (Python, NumPy, torch and TensorFlow are already seeded with it)."""
    if _trial_seed is None:
        raise RuntimeError("pedl.get_trial_seed() was called outside a running trial")
    return _trial_seed


def get_experiment_config() -> dict[str, Any]:
    """The running trial's experiment config, as validated (defaults filled in)."""
    if _experiment_config is None:
        raise RuntimeError("pedl.util.get_experiment_config() was called outside a running trial")
    return _experiment_config


REPLAY_MISMATCH_POLICIES = ("fail", "warn")
_replay_mismatch = "fail"


def set_replay_mismatch(policy: str | None) -> None:
    """What a resumed trial does when a replayed generator gives other data
    (`reproducibility.replay_mismatch`; see `pedl.keras._replay`)."""
    global _replay_mismatch
    _replay_mismatch = policy or "fail"


def replay_mismatch() -> str:
    return _replay_mismatch
