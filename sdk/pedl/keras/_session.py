"""What of a trial's `session_config()` (a TF 1 `tf.compat.v1.ConfigProto`) TensorFlow 2's eager
runtime can honour: the thread pools' sizes (`tf.config.threading`) and soft device placement.
The rest (GPU options, graph options) has no eager counterpart and is ignored."""

from __future__ import annotations

from typing import Any


def apply_session_config(config: Any, where: str = "session_config()") -> None:
    if config is None:
        return
    import tensorflow as tf

    if not isinstance(config, tf.compat.v1.ConfigProto):
        raise TypeError(f"{where} must return a tf.compat.v1.ConfigProto, got {type(config).__name__}")
    threading = tf.config.threading
    try:
        if config.intra_op_parallelism_threads:
            threading.set_intra_op_parallelism_threads(config.intra_op_parallelism_threads)
        if config.inter_op_parallelism_threads:
            threading.set_inter_op_parallelism_threads(config.inter_op_parallelism_threads)
    except RuntimeError:
        pass  # TensorFlow already started its pools in this process (a restored or second trial)
    tf.config.set_soft_device_placement(config.allow_soft_placement)
