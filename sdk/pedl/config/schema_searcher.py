"""The `searcher` section of pedl's config schema: one shape per searcher name.

Field names, types and bounds are Determined's (expconf v0 `searcher-*.json`), plus PEDL's older
step-counted fields (`max_steps`, `target_trial_steps`, `step_budget`, `steps_per_round`) and pedl's
`async_halving` / `pbt`.
"""

from __future__ import annotations

from pedl.config.schema_parts import (
    BOOLEAN,
    Schema,
    choice,
    integer,
    length,
    number,
    section,
    text,
    when,
)

SEARCHER_NAMES = (
    "single",
    "random",
    "grid",
    "adaptive_asha",
    "async_halving",
    "adaptive",
    "adaptive_simple",
    "pbt",
)
MODES = ("aggressive", "standard", "conservative")

_FIELDS: dict[str, Schema] = {
    "name": choice(*SEARCHER_NAMES),
    "metric": text(non_empty=True),
    "smaller_is_better": BOOLEAN,
    "source_trial_id": integer(0),
    "source_checkpoint_uuid": text(non_empty=True),
    "max_length": length(1),
    "max_steps": integer(1),
    "target_trial_steps": integer(1),
    "max_trials": integer(1),
    "max_concurrent_trials": integer(0),
    "mode": choice(*MODES),
    "divisor": number(exclusive_minimum=1),
    "max_rungs": integer(1),
    "bracket_rungs": {"type": "array", "items": integer(1)},
    "stop_once": BOOLEAN,
    "time_metric": text(non_empty=True),
    "max_time": integer(1),
    "num_rungs": integer(1),
    "budget": length(1),
    "step_budget": integer(1),
    "train_stragglers": BOOLEAN,
    "population_size": integer(1),
    "num_rounds": integer(1),
    "length_per_round": length(1),
    "steps_per_round": integer(1),
    "replace_function": section(
        {"truncate_fraction": number(minimum=0, maximum=0.5)}, required=("truncate_fraction",)
    ),
    "explore_function": section(
        {
            "resample_probability": number(minimum=0, maximum=1),
            "perturb_factor": number(minimum=0, maximum=1),
        },
        required=("resample_probability", "perturb_factor"),
    ),
}

_COMMON = ("name", "metric", "smaller_is_better", "source_trial_id", "source_checkpoint_uuid")
_ADAPTIVE = ("mode", "divisor", "max_rungs", "bracket_rungs", "stop_once", "max_concurrent_trials")
KEYS: dict[str, tuple[str, ...]] = {
    "single": (*_COMMON, "max_length", "max_steps"),
    "random": (*_COMMON, "max_length", "max_steps", "max_trials", "max_concurrent_trials"),
    "grid": (*_COMMON, "max_length", "max_steps", "max_concurrent_trials"),
    "adaptive_asha": (
        *_COMMON,
        "max_length",
        "max_steps",
        "max_trials",
        "time_metric",
        "max_time",
        *_ADAPTIVE,
    ),
    "adaptive_simple": (*_COMMON, "max_length", "max_steps", "max_trials", *_ADAPTIVE),
    "async_halving": (
        *_COMMON,
        "max_length",
        "max_steps",
        "max_trials",
        "num_rungs",
        "divisor",
        "stop_once",
        "max_concurrent_trials",
    ),
    "adaptive": (
        *_COMMON,
        "max_length",
        "max_steps",
        "target_trial_steps",
        "budget",
        "step_budget",
        "train_stragglers",
        *_ADAPTIVE,
    ),
    "pbt": (
        *_COMMON,
        "population_size",
        "num_rounds",
        "length_per_round",
        "steps_per_round",
        "replace_function",
        "explore_function",
    ),
}
# Required beyond `metric`, by searcher (Determined's eventuallyRequired, and pedl's pbt / async_halving).
_REQUIRED: dict[str, tuple[str, ...]] = {
    "random": ("max_trials",),
    "adaptive_asha": ("max_trials",),
    "adaptive_simple": ("max_trials",),
    "async_halving": ("max_trials", "num_rungs"),
    "pbt": ("population_size", "num_rounds", "replace_function", "explore_function"),
}


def _one(name: str) -> Schema:
    required = _REQUIRED.get(name, ())
    return when(
        "name",
        name,
        section(
            {key: _FIELDS[key] for key in KEYS[name]},
            required=("metric", *required),
            unknown=f"field for the {name} searcher",
            required_messages={key: f"is required for the {name} searcher" for key in required},
        ),
    )


SEARCHER: Schema = {
    "type": "object",
    "required": ["name"],
    "x-required": {"name": f"is required (one of {', '.join(SEARCHER_NAMES)})"},
    "properties": {"name": _FIELDS["name"]},
    "allOf": [_one(name) for name in SEARCHER_NAMES],
}
