"""TensorBoard event files of pedl trials' training and validation metrics, written without TensorFlow.

Layout under a log directory: `exp-<id>/trial-<id>/training` and `.../validation`, one run
each, so TensorBoard overlays a trial's training and validation curves per metric name; the
step axis is the number of batches trained.
"""

from pedl.tensorboard.events import ScalarEventWriter, scalars
from pedl.tensorboard.sync import MetricsSource, MetricsSync, run_dir

__all__ = ["MetricsSource", "MetricsSync", "ScalarEventWriter", "run_dir", "scalars"]
