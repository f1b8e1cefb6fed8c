"""Determined's PyTorch API (`det.pytorch`) on pedl's PyTorch controller."""

from determined.pytorch import samplers
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._context import DistributedContext, PyTorchTrialContext
from determined.pytorch._data import Batch, DataLoader, Epoch
from determined.pytorch._load import load_trial_from_checkpoint_path
from determined.pytorch._reducer import MetricReducer, Reducer, _SimpleReducer
from determined.pytorch._trainer import Trainer, init
from determined.pytorch._trial import PyTorchTrial
from pedl.frameworks.pytorch import reset_parameters
from pedl.frameworks.pytorch._lr import LRScheduler
from pedl.pytorch._data import to_device
from pedl.pytorch._trial import TorchData

__all__ = [
    "Batch",
    "DataLoader",
    "DistributedContext",
    "Epoch",
    "LRScheduler",
    "MetricReducer",
    "PyTorchCallback",
    "PyTorchTrial",
    "PyTorchTrialContext",
    "Reducer",
    "TorchData",
    "_SimpleReducer",
    "Trainer",
    "init",
    "load_trial_from_checkpoint_path",
    "reset_parameters",
    "samplers",
    "to_device",
]
