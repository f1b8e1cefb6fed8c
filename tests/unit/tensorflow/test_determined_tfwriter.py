"""Determined's `TFWriter`: scalars written with TensorFlow's event writer land in the run's
TensorBoard directory, where TensorBoard reads them back."""

from __future__ import annotations

import numpy as np

from pedl.harness.compat import ensure_determined_importable
from pedl.harness.tensorboard_sync import flush_writers

ensure_determined_importable()


def test_tfwriter_scalars_are_read_back_from_the_runs_directory(tmp_path, monkeypatch) -> None:
    from determined.tensorboard.metric_writers.tensorflow import TFWriter
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("PEDL_TENSORBOARD_DIR", str(tmp_path / "tb"))
    writer = TFWriter()
    for step in range(3):
        writer.add_scalar("tf/value", np.float32(step * 1.5), step)
    flush_writers()  # what the harness does before each upload
    accumulator = EventAccumulator(str(tmp_path / "tb"))
    accumulator.Reload()
    assert [(e.step, e.value) for e in accumulator.Scalars("tf/value")] == [(0, 0.0), (1, 1.5), (2, 3.0)]
    writer.reset()
    writer.add_scalar("tf/value", 9, 3)
    writer.flush()
