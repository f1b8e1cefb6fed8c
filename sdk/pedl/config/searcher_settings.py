"""The `searcher` section as the scheduler, the searchers and the harness read it: a frozen, typed
value built once where the config is parsed (`parse_experiment_config`, `carried.from_json`).

The search methods read their knobs (max_trials, divisor, rungs, population, ...) when they are made
and when they are restored after a restart; reading them as fields of one typed value rather than
`.get` on the validated mapping, with defaults repeated at each reader, lets mypy check them and keeps
the defaults in one place (`pedl.config.searcher` fills them, this keeps them). The section as the user
wrote it (with defaults) stays `ExperimentConfig.raw["searcher"]`, what user code receives; the value
is also a read-only mapping of it (`section`), for code that shows the config as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pedl.config._checks import is_int
from pedl.config.section_view import SectionView


@dataclass(frozen=True, eq=False)
class SearcherSettings(SectionView):
    name: str
    metric: str
    smaller_is_better: bool = True
    max_trials: int | None = None  # None: the searcher has no planned number (single, grid, pbt)
    max_concurrent_trials: int = 0  # 0: no limit
    # ASHA and the adaptive searchers
    mode: str = "standard"
    divisor: float = 4.0
    max_rungs: int = 5
    num_rungs: int | None = None  # async_halving's
    stop_once: bool = False
    bracket_rungs: tuple[int, ...] = ()
    train_stragglers: bool = True
    # pbt
    population_size: int = 0
    num_rounds: int = 0
    truncate_fraction: float = 0.0
    resample_probability: float = 0.0
    perturb_factor: float = 0.0
    # a Core API script's ASHA on a metric it reports
    time_metric: str | None = None
    # the unit searcher.max_length is written in (a Core API script counts in it)
    written_length_unit: str = "batches"
    # warm start
    source_checkpoint_uuid: str | None = None
    source_trial_id: int | None = None
    section: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> SearcherSettings:
        """From the validated section (`pedl.config.searcher.validate_searcher` filled its defaults)."""
        replace_fn = section.get("replace_function") or {}
        explore_fn = section.get("explore_function") or {}
        max_trials = section.get("max_trials")
        max_length = section.get("max_length")
        trial_id = section.get("source_trial_id")
        return cls(
            name=str(section["name"]),
            metric=str(section["metric"]),
            smaller_is_better=bool(section.get("smaller_is_better", True)),
            max_trials=max_trials if isinstance(max_trials, int) and is_int(max_trials) else None,
            max_concurrent_trials=int(section.get("max_concurrent_trials") or 0),
            mode=str(section.get("mode", "standard")),
            divisor=float(section.get("divisor", 4)),
            max_rungs=int(section.get("max_rungs", 5)),
            num_rungs=int(section["num_rungs"]) if "num_rungs" in section else None,
            stop_once=bool(section.get("stop_once", False)),
            bracket_rungs=tuple(int(r) for r in section.get("bracket_rungs") or ()),
            train_stragglers=bool(section.get("train_stragglers", True)),
            population_size=int(section.get("population_size") or 0),
            num_rounds=int(section.get("num_rounds") or 0),
            truncate_fraction=float(replace_fn.get("truncate_fraction") or 0),
            resample_probability=float(explore_fn.get("resample_probability") or 0),
            perturb_factor=float(explore_fn.get("perturb_factor") or 0),
            time_metric=section.get("time_metric"),
            written_length_unit=(
                next(iter(max_length)) if isinstance(max_length, dict) and len(max_length) == 1 else "batches"
            ),
            source_checkpoint_uuid=section.get("source_checkpoint_uuid"),
            source_trial_id=int(trial_id) if trial_id is not None else None,
            section=dict(section),
        )
