"""PEDL's `adaptive` and `adaptive_simple`, run as asynchronous successive halving.

Both used synchronous successive halving; ASHA keeps their meaning (the same brackets from `mode`
and `max_rungs`, the same top length) without waiting for a whole rung before promoting.

- `adaptive_simple`: `max_trials` split evenly over the brackets, as PEDL did.
- `adaptive`: no trial count; each bracket gets an equal share of `budget` (`step_budget`) and as
  many trials as that share pays for, given that 1/divisor of each rung goes on to the next
  (asynchronous promotion goes over that by up to a third, as early results are promoted before
  their rung fills up).
  `train_stragglers: false` turns off resuming a bracket's best trial when none reached the top.
"""

from __future__ import annotations

from typing import Any

from pedl.searcher._base import SearcherError
from pedl.searcher.asha import (
    ASHASearch,
    BracketPlan,
    expected_batches_per_trial,
    mode_brackets,
    rung_lengths,
    rungs_fitting,
)


class AdaptiveSimpleSearch(ASHASearch):
    def plan_brackets(self) -> list[BracketPlan]:
        max_trials = self.config.searcher.max_trials or 0
        brackets = _brackets(self)
        count, remainder = divmod(max_trials, len(brackets))
        return [BracketPlan(r, max(count + (i < remainder), 1)) for i, r in enumerate(brackets)]


class AdaptiveSearch(ASHASearch):
    def __init__(self, config: Any, seed: int) -> None:
        super().__init__(config, seed)
        self.rescue_stragglers = self.rescue_stragglers and self.config.searcher.train_stragglers

    def plan_brackets(self) -> list[BracketPlan]:
        budget = self.config.budget
        if not budget:
            raise SearcherError("searcher.budget: the adaptive searcher needs a budget")
        brackets = _brackets(self)
        share = budget / len(brackets)
        plans = []
        for rungs in brackets:
            lengths = rung_lengths(self.config.max_length, self.divisor, rungs)
            cost = expected_batches_per_trial(lengths, self.divisor)
            plans.append(BracketPlan(rungs, max(int(share / cost), 1)))
        return plans


def _brackets(search: ASHASearch) -> list[int]:
    searcher = search.config.searcher
    if searcher.bracket_rungs:
        return sorted(searcher.bracket_rungs, reverse=True)
    max_rungs = min(searcher.max_rungs, rungs_fitting(search.config.max_length, search.divisor))
    return mode_brackets(searcher.mode, max_rungs)
