"""PEDL's PyTorch interface: subclass `PyTorchTrial`, return `DataLoader`s from make_data_loaders."""

from pedl.pytorch._controller import PyTorchTrialController
from pedl.pytorch._data import DataLoader
from pedl.pytorch._load import load_trial_from_checkpoint_path
from pedl.pytorch._trial import PyTorchTrial

__all__ = ["DataLoader", "PyTorchTrial", "PyTorchTrialController", "load_trial_from_checkpoint_path"]
