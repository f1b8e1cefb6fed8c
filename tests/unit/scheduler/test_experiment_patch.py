"""PatchExperiment's rules: labels added once and removed only if present, archiving only ended
experiments, the description replaced (even by an empty one)."""

from __future__ import annotations

import json

import pytest

from pedl.v1 import scheduler_pb2
from pedl_scheduler.experiment_patch import PatchError, changes

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
