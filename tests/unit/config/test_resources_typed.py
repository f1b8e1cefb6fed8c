"""`ExperimentConfig.resources` is one typed value (what the scheduler's passes read), with Determined's
defaults where the config leaves a field out; user code still receives the mapping in `raw`."""

from __future__ import annotations

from pedl.config import carried, parse_experiment_config
from pedl.config.resources import Resources

SEARCHER = "searcher: {name: single, metric: error, max_length: {batches: 10}}\n"


def test_left_out_fields_take_the_defaults_the_scheduler_applies() -> None:
    config = parse_experiment_config(SEARCHER)
    assert config.resources == Resources(slots_per_trial=1, weight=1.0)
    assert (config.resource_pool, config.resources.max_slots, config.resources.priority) == (
        "default",
        None,
        None,
    )
    assert config.raw["resources"] == {"slots_per_trial": 1, "weight": 1, "native_parallel": False}


def test_written_fields_arrive_typed_and_survive_the_trip_to_an_agent() -> None:
    config = parse_experiment_config(
        SEARCHER + "resources: {slots_per_trial: 2, max_slots: 4, weight: 3, priority: 7, "
        "resource_pool: gpus, agent_label: a100}\n"
    )
    expected = Resources(
        slots_per_trial=2, max_slots=4, weight=3.0, priority=7, resource_pool="gpus", agent_label="a100"
    )
    assert config.resources == expected and isinstance(config.resources.weight, float)
    assert carried.carried(config).resources == expected
    assert config.slots_per_trial == 2 and config.resource_pool == "gpus"
