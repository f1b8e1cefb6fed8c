"""PatchExperiment's rules: labels added once and removed only if present, archiving only ended
experiments, the description replaced (even by an empty one); resources knobs and the GC policy
changed in the config and checked as at creation."""

from __future__ import annotations

import json

import pytest

from pedl.v1 import scheduler_pb2
from pedl_scheduler.experiment_patch import PatchError, changes, config_change

ROW = {"id": 4, "state": "COMPLETED", "labels_json": '["a"]'}


def request(**fields: object) -> scheduler_pb2.PatchExperimentRequest:
    return scheduler_pb2.PatchExperimentRequest(experiment_id=4, **fields)  # type: ignore[arg-type]


def test_labels_are_added_once_and_removed() -> None:
    out = changes(ROW, request(add_labels=["b", "a", "b"], remove_labels=["a"]))
    assert json.loads(out["labels_json"]) == ["b"] and set(out) == {"labels_json"}


def test_removing_a_missing_label_names_it() -> None:
    with pytest.raises(PatchError, match="experiment 4 has no label 'z'"):
        changes(ROW, request(remove_labels=["z"]))


def test_blank_label_is_refused() -> None:
    with pytest.raises(PatchError, match="label ' '"):
        changes(ROW, request(add_labels=[" "]))


def test_only_ended_experiments_are_archived_but_any_can_be_unarchived() -> None:
    assert changes(ROW, request(archived=True)) == {"archived": True}
    active = {**ROW, "state": "ACTIVE"}
    with pytest.raises(PatchError, match="experiment 4 is ACTIVE: only an ended experiment"):
        changes(active, request(archived=True))
    assert changes(active, request(archived=False)) == {"archived": False}


def test_description_is_replaced_even_by_an_empty_one() -> None:
    assert changes(ROW, request(description="")) == {"description": ""}
    assert changes(ROW, request()) == {}


CONFIG = {
    "hyperparameters": {},
    "searcher": {"name": "single", "metric": "error", "max_length": {"batches": 10}},
    "resources": {"max_slots": 4},
}
RUNNING = {"id": 4, "state": "ACTIVE", "labels_json": "[]", "config_json": json.dumps(CONFIG)}


def test_resources_knobs_change_the_config_as_at_creation() -> None:
    config = config_change(RUNNING, request(weight=2.5, priority=10))
    assert config.resources.weight == 2.5 and config.resources.priority == 10
    assert config.resources.max_slots == 4
    assert config_change(RUNNING, request(max_slots=2)).resources.max_slots == 2
    assert config_change(RUNNING, request(max_slots=0)).resources.max_slots is None  # `none`: no cap
    assert "max_slots: 2" in config_change(RUNNING, request(max_slots=2)).masked_yaml()
    assert config_change(RUNNING, request(description="x")) is None


def test_bad_values_name_the_field() -> None:
    with pytest.raises(PatchError, match="resources.priority: must be at most 99"):
        config_change(RUNNING, request(priority=100))
    with pytest.raises(PatchError, match="resources.weight: must be greater than 0"):
        config_change(RUNNING, request(weight=0.0))
    with pytest.raises(PatchError, match="resources.max_slots: must be at least 1"):
        config_change(RUNNING, request(max_slots=-1))
    policy = scheduler_pb2.CheckpointGcPolicy(save_trial_best=-1)
    with pytest.raises(PatchError, match="checkpoint_storage.save_trial_best: must be at least 0"):
        config_change(RUNNING, request(gc_policy=policy))


def test_an_ended_experiment_takes_a_gc_policy_but_no_resources() -> None:
    ended = {**RUNNING, "state": "COMPLETED"}
    policy = scheduler_pb2.CheckpointGcPolicy(save_experiment_best=1, save_trial_best=0, save_trial_latest=2)
    storage = config_change(ended, request(gc_policy=policy)).checkpoint_storage
    assert (storage["save_experiment_best"], storage["save_trial_best"], storage["save_trial_latest"]) == (
        1,
        0,
        2,
    )
    with pytest.raises(PatchError, match="experiment 4 has ended \\(COMPLETED\\): resources.weight matters"):
        config_change(ended, request(weight=2.0))


def test_notes_are_replaced_and_cleared_and_bounded() -> None:
    assert changes(ROW, request(notes="lr 0.1 diverges")) == {"notes": "lr 0.1 diverges"}
    assert changes(ROW, request(notes="")) == {"notes": ""}  # cleared, not left as they were
    assert changes(ROW, request(description="d")) == {"description": "d"}  # notes untouched
    with pytest.raises(PatchError, match="notes are longer than 32768 characters"):
        changes(ROW, request(notes="x" * 40_000))


def test_a_running_experiments_held_config_is_changed_without_parsing_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PatchExperiment on a running experiment keeps the typed config the scheduler holds: its
    derived values (trial length, periods, entrypoint) stay, the stored row is not read, nothing parses."""
    from pedl.config import experiment, parse_experiment_config

    held = parse_experiment_config(
        "searcher: {name: single, metric: error, max_length: {epochs: 3}}\n"
        "records_per_epoch: 640\nhyperparameters: {global_batch_size: 64}\n"
        "min_validation_period: {epochs: 1}\n"
    )
    row = {**RUNNING, "config_json": "not read"}

    def no_parse(data: object) -> None:
        raise AssertionError("the held config was parsed again")

    monkeypatch.setattr(experiment, "_build", no_parse)
    policy = scheduler_pb2.CheckpointGcPolicy(save_trial_latest=3)
    config = config_change(row, request(name="renamed", priority=7, gc_policy=policy), held=held)
    assert config is not None
    assert (config.name, config.resources.priority, config.checkpoint_storage["save_trial_latest"]) == (
        "renamed",
        7,
        3,
    )
    assert (config.max_length, config.length_unit, config.min_validation_period) == (
        held.max_length,
        held.length_unit,
        held.min_validation_period,
    )
    assert held.name is None and held.resources.priority is None  # the held one is not changed in place
    with pytest.raises(PatchError, match="resources.weight: must be greater than 0"):
        config_change(row, request(weight=0.0), held=held)
