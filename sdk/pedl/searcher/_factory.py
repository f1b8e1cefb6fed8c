"""Builds the search method an experiment config names."""

from __future__ import annotations

from typing import Any

from pedl.searcher._base import SearcherError, SearchMethod
from pedl.searcher.adaptive import AdaptiveSearch, AdaptiveSimpleSearch
from pedl.searcher.asha import ASHASearch, AsyncHalvingSearch
from pedl.searcher.concurrency import limit_concurrency
from pedl.searcher.grid import GridSearch
from pedl.searcher.pbt import PBTSearch
from pedl.searcher.random import RandomSearch
from pedl.searcher.single import SingleSearch

_METHODS: dict[str, type[SearchMethod]] = {
    "single": SingleSearch,
    "random": RandomSearch,
    "grid": GridSearch,
    "adaptive_asha": ASHASearch,
    "async_halving": AsyncHalvingSearch,
    "adaptive": AdaptiveSearch,
    "adaptive_simple": AdaptiveSimpleSearch,
    "pbt": PBTSearch,
}


def make_search_method(config: Any, seed: int) -> SearchMethod:
    """`config` is a `pedl.config.ExperimentConfig`; `seed` the experiment's seed."""
    name = config.searcher_name
    method = _METHODS.get(name)
    if method is None:
        raise SearcherError(
            f"searcher.name: {name!r} is not available yet; available: {', '.join(sorted(_METHODS))}"
        )
    return limit_concurrency(method(config, seed), config)


def restore_search_method(config: Any, seed: int, snapshot: dict[str, Any]) -> SearchMethod:
    method = make_search_method(config, seed)
    method.restore(snapshot)
    return method
