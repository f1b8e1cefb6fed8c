"""`pedl.frameworks.pytorch.data`: the DataLoader and batch type PEDL 0.10/0.11 model definitions use."""

from pedl.pytorch._data import DataLoader
from pedl.pytorch._trial import TorchData

__all__ = ["DataLoader", "TorchData"]
