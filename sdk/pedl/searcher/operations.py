"""The lengths of Determined's legacy searcher operations (`core_context.searcher.operations()`).

A Core API script under a searcher with a `max_length` trains to each operation's length and
reports its searcher metric there. The lengths are those the searcher can ask a trial to be
validated at: the max length, and for ASHA every rung of every bracket (a trial in a bracket
that starts higher simply reports at the lower lengths too).
"""

from __future__ import annotations

from typing import Any

from pedl.searcher.asha import ASHASearch


def operation_lengths(config: Any) -> list[int]:
    """Ascending lengths for `config` (an ExperimentConfig); empty when the searcher has no length."""
    if not config.max_length or config.searcher.time_metric:
        return []
    if config.searcher_name == "adaptive_asha":
        search = ASHASearch(config, 0)
        return sorted({length for bracket in search.brackets for length in bracket.rung_lengths})
    return [config.max_length]
