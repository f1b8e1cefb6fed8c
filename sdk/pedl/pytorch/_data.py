"""Batches as data loaders produce them (seed 002), turned into tensors on the trial's device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.utils.data


class DataLoader(torch.utils.data.DataLoader):
    """PEDL's DataLoader: a drop-in replacement for `torch.utils.data.DataLoader`.

    It behaves exactly like torch's; plain torch DataLoaders are accepted as well.
    """


class BatchError(TypeError):
    """A batch (or part of one) that cannot become a tensor."""


def _path_text(path: str, key: object) -> str:
    return f"{path}[{key!r}]"


def to_device(data: Any, device: torch.device, path: str = "batch") -> Any:
    """`data` with every np.ndarray/tensor as a tensor on `device`, keeping its nesting.

    `path` names where `data` sits (e.g. "batch[0]['image']") for the error on anything else.
    """
    if isinstance(data, torch.Tensor):
        return data.to(device, non_blocking=True)
    if isinstance(data, np.ndarray):
        try:
            return torch.from_numpy(data).to(device, non_blocking=True)
        except TypeError as exc:
            raise BatchError(
                f"{path}: np.ndarray of dtype {data.dtype} cannot be converted to a tensor"
            ) from exc
    if isinstance(data, tuple):
        return tuple(to_device(v, device, _path_text(path, i)) for i, v in enumerate(data))
    if isinstance(data, list):
        return [to_device(v, device, _path_text(path, i)) for i, v in enumerate(data)]
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            if not isinstance(key, str):
                raise BatchError(
                    f"{path}: dict keys must be strings, found key {key!r} of type {type(key).__name__}"
                )
            out[key] = to_device(value, device, _path_text(path, key))
        return out
    if isinstance(data, (bool, int, float, np.generic)):
        return torch.as_tensor(data, device=device)
    raise BatchError(
        f"{path}: {type(data).__module__}.{type(data).__qualname__} cannot be converted to a tensor "
        "(expected np.ndarray, torch.Tensor, or a tuple, list or str-keyed dict of them)"
    )


def split_batch(batch: Any) -> tuple[Any, Any]:
    """(input, target) of a batch; data loaders must yield pairs (seed 002)."""
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    shape = f"a {type(batch).__name__}"
    if isinstance(batch, (tuple, list)):
        shape += f" of {len(batch)} items"
    raise BatchError(f"batch must be a pair (input, target), got {shape}")


def batch_length(data: Any) -> int:
    """Samples in a batch: the first dimension of its first tensor (0 if it has none)."""
    if isinstance(data, torch.Tensor):
        return int(data.shape[0]) if data.dim() > 0 else 1
    if isinstance(data, (tuple, list)):
        for item in data:
            n = batch_length(item)
            if n:
                return n
        return 0
    if isinstance(data, dict):
        return batch_length(list(data.values()))
    return 0
