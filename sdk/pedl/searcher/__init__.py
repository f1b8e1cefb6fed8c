"""Searchers: pure state machines that decide which trials to run and for how long.

Events go in (trial created, validation completed, trial closed or exited early) and
operations come out (Create, Resume, ValidateAfter, Close, Shutdown). No I/O, so the scheduler,
local mode and tests all drive the same objects, and a snapshot restores one exactly.
"""

from pedl.searcher._base import SearcherError, SearchMethod
from pedl.searcher._factory import make_search_method, restore_search_method
from pedl.searcher._metric import MetricError, is_better, searcher_metric
from pedl.searcher._ops import Close, Create, Operation, Resume, Shutdown, ValidateAfter

__all__ = [
    "SearchMethod",
    "SearcherError",
    "Operation",
    "Create",
    "Resume",
    "ValidateAfter",
    "Close",
    "Shutdown",
    "make_search_method",
    "restore_search_method",
    "MetricError",
    "searcher_metric",
    "is_better",
]
