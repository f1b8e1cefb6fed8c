"""`grid`: one trial per point of the hyperparameter grid, each trained to the max length.

The grid is the product of `count` evenly spaced values per numeric hyperparameter, every
categorical value and each const. Trials are created in grid order, as many at once
as a concurrency limit allows, as for `random`.
"""

from __future__ import annotations

import copy
from typing import Any

from pedl.config.hyperparameters import grid
from pedl.searcher.random import RandomSearch


class GridSearch(RandomSearch):
    replaces_invalid_hp = False  # each point is one trial, valid or not (as Determined's grid)

    def __init__(self, config: Any, seed: int) -> None:
        # The points are a pure function of the config, so they are recomputed, not snapshotted.
        self.points = grid(config.hyperparameters)
        super().__init__(config, seed)

    def _total_trials(self) -> int:
        return len(self.points)

    def _next_hparams(self) -> dict[str, Any]:
        return copy.deepcopy(self.points[self.created])
