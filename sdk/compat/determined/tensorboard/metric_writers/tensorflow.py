"""`TFWriter`: TensorFlow's event file writer (`.writer`) on the run's TensorBoard directory."""

from __future__ import annotations

import time
from typing import Any

import tensorflow as tf
from tensorflow.core.util import event_pb2
from tensorflow.python.summary.writer import event_file_writer

from determined import tensorboard


class TFWriter(tensorboard.MetricWriter):
    """Writes scalar summaries as TensorFlow's FileWriter would; the harness flushes it before each upload."""

    def __init__(self) -> None:
        self.writer: Any = event_file_writer.EventFileWriter(logdir=str(tensorboard.get_base_path({})))
        tensorboard.register_writer(self.writer)

    def add_scalar(self, name: str, value: Any, step: int) -> None:
        if hasattr(value, "item"):  # numpy scalars and one-element arrays
            value = value.item()
        summary = tf.compat.v1.Summary(
            value=[tf.compat.v1.Summary.Value(tag=name, simple_value=float(value))]
        )
        self.writer.add_event(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))

    def reset(self) -> None:
        self.writer.close()
        self.writer.reopen()

    def flush(self) -> None:
        self.writer.flush()
