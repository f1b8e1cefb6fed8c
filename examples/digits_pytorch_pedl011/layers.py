"""A layer shared by the model definition, imported as a sibling module (`from layers import Flatten`)."""

from torch import nn


class Flatten(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return x.reshape(x.size(0), -1)
