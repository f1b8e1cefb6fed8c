"""Determined's Core API (`det.core`) on pedl: a training script of its own becomes a trial.

`with det.core.init() as core_context:` gives the contexts Determined documents: `train`
(metrics, progress), `checkpoint` (store_path, restore_path, upload, download, get_metadata),
`preempt` (should_preempt), `searcher` (legacy operations) and `distributed`.
"""

from determined.core._checkpoint import CheckpointContext, DownloadMode
from determined.core._context import Context, TensorboardMode, init
from determined.core._distributed import DistributedContext, DummyDistributedContext
from determined.core._link import CoreApiError
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._searcher import SearcherContext, SearcherMode, SearcherOperation, Unit
from determined.core._train import EarlyExitReason, TrainContext

__all__ = [
    "CheckpointContext",
    "Context",
    "CoreApiError",
    "DistributedContext",
    "DownloadMode",
    "DummyDistributedContext",
    "EarlyExitReason",
    "PreemptContext",
    "PreemptMode",
    "SearcherContext",
    "SearcherMode",
    "SearcherOperation",
    "TensorboardMode",
    "TrainContext",
    "Unit",
    "init",
]
