"""TensorBoard event files of pedl trials' training and validation metrics, written without TensorFlow.

Layout under a log directory: `exp-<id>/trial-<id>/training` and `.../validation`, one run
each, so TensorBoard overlays a trial's training and validation curves per metric name; the
step axis is the number of batches trained. The event files a trial wrote itself (Determined's
TensorBoard writers, `get_tensorboard_path()`) are fetched from the checkpoint store into
`exp-<id>/trial-<id>/files/` (`files_sync.py`).
"""

from pedl.tensorboard.events import ScalarEventWriter, scalars
from pedl.tensorboard.sync import MetricsSource, MetricsSync, run_dir

__all__ = ["MetricsSource", "MetricsSync", "ScalarEventWriter", "run_dir", "scalars"]
