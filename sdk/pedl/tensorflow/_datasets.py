"""The user's (eager) tf.data.Datasets, checked and re-created inside another graph or anew.

`make_data_loaders` builds its datasets eagerly, outside the trial's graph. A dataset's
serialized graph (with its shuffle seeds) can be instantiated any number of times, in any
graph, and each copy yields the same sequence: that is what makes the data position of a
checkpoint restorable by skipping the batches already trained.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf


def check_pair(data_loaders: Any, origin: str) -> tuple[tf.data.Dataset, tf.data.Dataset]:
    expected = "a pair (training tf.data.Dataset, validation tf.data.Dataset)"
    if not isinstance(data_loaders, (tuple, list)) or len(data_loaders) != 2:
        got = type(data_loaders).__name__
        if isinstance(data_loaders, (tuple, list)):
            got += f" of {len(data_loaders)} items"
        raise TypeError(f"{origin} must return {expected}; it returned a {got}")
    for role, dataset in zip(("training", "validation"), data_loaders, strict=True):
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError(
                f"{origin} must return {expected}; its {role} dataset is a "
                f"{type(dataset).__module__}.{type(dataset).__qualname__}"
            )
    return data_loaders[0], data_loaders[1]


def common_spec(training: tf.data.Dataset, validation: tf.data.Dataset, origin: str) -> Any:
    """The element spec both datasets fit (shapes relaxed where they differ, e.g. batch size).

    Both must have the same nesting and dtypes, since one graph reads either.
    """
    train_spec, val_spec = training.element_spec, validation.element_spec
    mismatch = (
        f"{origin} returned datasets of different structures, but one graph reads both: "
        f"training {train_spec} vs validation {val_spec}"
    )
    try:
        tf.nest.assert_same_structure(train_spec, val_spec)
    except (TypeError, ValueError):
        raise ValueError(mismatch) from None

    def merge(a: Any, b: Any) -> Any:
        if not (isinstance(a, tf.TensorSpec) and isinstance(b, tf.TensorSpec)):
            raise ValueError(f"{mismatch} (only dense tensors are supported, found {a} and {b})")
        if a.dtype != b.dtype or a.shape.rank != b.shape.rank:
            raise ValueError(mismatch)
        return tf.TensorSpec(a.shape.most_specific_compatible_shape(b.shape), a.dtype)

    return tf.nest.map_structure(merge, train_spec, val_spec)


def serialize(dataset: tf.data.Dataset, what: str) -> bytes:
    """The dataset's GraphDef; `from_serialized` re-creates it (same seeds, same order)."""
    try:
        graph_def = dataset._as_serialized_graph(
            external_state_policy=tf.data.experimental.ExternalStatePolicy.WARN,
            strip_device_assignment=True,
        )
    except Exception as exc:
        raise ValueError(f"{what} cannot be serialized into the trial's graph: {exc}") from exc
    return bytes(graph_def.numpy())


def from_serialized(graph_def: tf.Tensor | bytes, spec: Any) -> tf.data.Dataset:
    """A fresh copy of a serialized dataset, in the current graph (or eagerly).

    In a graph, pass the GraphDef through a placeholder: a constant gets folded away by Grappler.
    """
    return tf.data.experimental.from_variant(tf.raw_ops.DatasetFromGraph(graph_def=graph_def), spec)
