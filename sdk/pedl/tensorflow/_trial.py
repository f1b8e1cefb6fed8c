"""TensorFlowTrial: the graph-mode (`tf.compat.v1`) TensorFlow interface (seed 003)."""

from __future__ import annotations

import abc
from typing import Any

import tensorflow as tf

from pedl.trial import Trial


class TensorFlowTrial(Trial):
    """Subclass it; `make_data_loaders` returns (training, validation) batched `tf.data.Dataset`s.

    PEDL builds ONE graph: `build_graph(record, is_training)` receives the dataset output through
    an iterator that a boolean `is_training` tensor switches between the training and the
    validation data, and returns named tensors, "loss" among them.

    A restored trial continues with the same variables, optimizer slots and training batches;
    stateful random ops in the graph (e.g. `tf.nn.dropout`) restart their streams, so only
    graphs without them (or with stateless random ops) resume bit for bit.
    """

    framework_interface = "TensorFlowTrial"
    several_slots = False  # one process trains; data-parallel TensorFlow is the Keras trial's

    @abc.abstractmethod
    def build_graph(self, record: Any, is_training: tf.Tensor) -> dict[str, tf.Tensor]:
        """Tensors by name for `record` (one batch of either dataset); must include "loss"."""

    @abc.abstractmethod
    def optimizer(self) -> tf.compat.v1.train.Optimizer:
        """The optimizer that minimizes "loss", e.g. `tf.compat.v1.train.MomentumOptimizer`."""

    @abc.abstractmethod
    def validation_metrics(self) -> list[str]:
        """Names of build_graph outputs averaged over the validation set."""

    def training_metrics(self) -> list[str]:
        """Names of build_graph outputs averaged over each step besides "loss" (always reported)."""
        return []

    def session_config(self) -> tf.compat.v1.ConfigProto:
        """The session's config; soft placement lets CPU-only ops sit beside GPU ones."""
        return tf.compat.v1.ConfigProto(allow_soft_placement=True)
