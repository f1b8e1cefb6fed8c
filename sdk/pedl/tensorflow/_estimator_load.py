"""A downloaded EstimatorTrial checkpoint's exported SavedModel, loaded for serving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pedl.harness.model_code import CODE_DIR
from pedl.tensorflow._checkpoint import read_metadata
from pedl.tensorflow._estimator import FRAMEWORK


def load_estimator_from_checkpoint_path(path: str | Path, tags: list[str] | None = None) -> Any:
    """The SavedModel the checkpoint exported (one `build_serving_input_receiver_fns()` entry), as
    `tf.compat.v1.saved_model.load_v2` gives it; `tags` default to ["serve"]."""
    import tensorflow as tf

    path = Path(path)
    read_metadata(path, FRAMEWORK)
    found = sorted(p for p in path.rglob("saved_model.pb") if CODE_DIR not in p.relative_to(path).parts[:1])
    if not found:
        raise ValueError(
            f"{path} holds no SavedModel: the trial's build_serving_input_receiver_fns() returned no "
            "serving input receiver functions, so its checkpoints export none"
        )
    if len(found) > 1:
        listed = ", ".join(str(p.parent.relative_to(path)) for p in found)
        raise ValueError(
            f"{path} holds {len(found)} SavedModels ({listed}), one per serving input receiver function; "
            "load the one you want with tf.compat.v1.saved_model.load_v2(DIR, tags)"
        )
    return tf.compat.v1.saved_model.load_v2(str(found[0].parent), tags if tags is not None else ["serve"])
