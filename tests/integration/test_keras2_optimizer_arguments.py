"""Keras 2 code written for TensorFlow 2.10 and older (Determined 0.12 to 0.20's examples:
`RMSprop(lr=..., decay=...)`) in TensorFlow 2.15's environment, whose `tf.keras.optimizers` refuse
`decay=` and ignore `lr=`: once a Determined or PEDL 0.11 Keras trial starts, pedl builds the
legacy optimizer of that name, which trains with the given rate and decay (pedl.keras._keras2)."""

from __future__ import annotations

import json
import subprocess

import pytest
from test_estimator import tf215_python  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration

_SCRIPT = """
import json, numpy as np, tensorflow as tf
from pedl.keras._keras2 import accept_keras2_spellings

try:
    tf.keras.optimizers.RMSprop(lr=1e-3, decay=0.01)
    before = "accepted"
except ValueError as e:
    before = str(e)
accept_keras2_spellings()
from tensorflow.keras.optimizers import RMSprop
model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
model.compile(RMSprop(lr=1e-3, decay=0.01), "mse")
model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=4, epochs=2, verbose=0)
current = tf.keras.optimizers.RMSprop(learning_rate=0.02)
print(json.dumps({
    "before": before,
    "legacy": "legacy" in type(model.optimizer).__module__,
    "steps": int(model.optimizer.iterations),
    "rate": float(model.optimizer._decayed_lr(tf.float32)),
    "current": [type(current).__module__, float(current.learning_rate)],
}))
"""


def test_tf210_optimizer_arguments_train_with_their_rate_and_decay(tf215_python: str) -> None:  # noqa: F811
    done = subprocess.run(
        [tf215_python, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "decay is deprecated" in result["before"]  # what Keras 2.15 itself says
    assert result["legacy"] and result["steps"] == 4
    # Keras 2.10's decay: lr / (1 + decay * iterations)
    assert result["rate"] == pytest.approx(1e-3 / (1 + 0.01 * 4), rel=1e-5)
    module, rate = result["current"]  # learning_rate= alone keeps Keras 2.15's own optimizer
    assert "legacy" not in module and rate == pytest.approx(0.02)
