"""`overwrite_deepspeed_config`: a DeepSpeed config with the experiment's overrides merged in;
`get_ds_config_from_hparams`: the same, with both named by the hyperparameters.

Determined's DeepSpeed examples keep a DeepSpeed JSON file beside the model and name overrides in
the hyperparameters (so that a search can vary them); this merges them, nested keys key by key.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def overwrite_deepspeed_config(
    base_ds_config: str | Path | Mapping[str, Any], source_ds_dict: Mapping[str, Any]
) -> dict[str, Any]:
    """`base_ds_config` (a DeepSpeed config, or the path of its JSON file) with every value of
    `source_ds_dict` put in; where both hold a mapping under one key, they are merged the same way."""
    if isinstance(base_ds_config, (str, Path)):
        try:
            base = json.loads(Path(base_ds_config).read_text(), object_pairs_hook=_no_duplicates)
        except (OSError, ValueError) as exc:
            raise ValueError(
                f"overwrite_deepspeed_config: cannot read {base_ds_config} as JSON: {exc}"
            ) from None
    elif isinstance(base_ds_config, Mapping):
        base = copy.deepcopy(dict(base_ds_config))
    else:
        raise TypeError(
            "overwrite_deepspeed_config takes a DeepSpeed config dict or a JSON file's path, "
            f"got {type(base_ds_config).__name__}"
        )
    if not isinstance(base, dict):
        raise ValueError(f"overwrite_deepspeed_config: {base_ds_config} holds no JSON object")
    return _merge(base, source_ds_dict)


def get_ds_config_from_hparams(
    hparams: Mapping[str, Any],
    model_dir: str | Path = ".",
    config_key: str = "deepspeed_config",
    overwrite_key: str = "overwrite_deepspeed_args",
) -> dict[str, Any]:
    """The DeepSpeed config `hparams[config_key]` names (a JSON file relative to `model_dir`, or the
    config itself), with `hparams[overwrite_key]` merged in when present."""
    if config_key not in hparams:
        raise ValueError(
            f"get_ds_config_from_hparams: the hyperparameters have no {config_key!r} (the DeepSpeed "
            f"config's file name); they have {', '.join(sorted(hparams)) or 'none'}"
        )
    base = hparams[config_key]
    if isinstance(base, (str, Path)):
        base = Path(model_dir) / base
    overrides = hparams.get(overwrite_key) or {}
    if not isinstance(overrides, Mapping):
        raise ValueError(
            f"get_ds_config_from_hparams: hyperparameter {overwrite_key!r} must be a mapping of "
            f"DeepSpeed config keys, got {type(overrides).__name__}"
        )
    return overwrite_deepspeed_config(base, overrides)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's keys, each once (DeepSpeed refuses a config that repeats one)."""
    seen = [k for i, (k, _) in enumerate(pairs) if k in (p[0] for p in pairs[:i])]
    if seen:
        raise ValueError(f"duplicate keys {sorted(set(seen))}")
    return dict(pairs)


def _merge(base: dict[str, Any], source: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in source.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            base[key] = _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base
