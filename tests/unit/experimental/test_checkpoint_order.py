"""The client's checkpoint orders: Determined's `list_checkpoints(sort_by, order_by)` and the best
checkpoint by a validation metric, without a cluster."""

from __future__ import annotations

from typing import Any

import pytest

from pedl.experimental.checkpoint import Checkpoint, ranked_checkpoints, sorted_checkpoints
from pedl.experimental.states import CheckpointSortBy, CheckpointState, ExperimentState, OrderBy, state_of


def _checkpoint(
    uuid: str, batches: int, error: float | None, state: str = "COMPLETED", trial: int = 1
) -> Checkpoint:
    metrics: dict[str, Any] | None = {"error": error} if error is not None else None
    return Checkpoint(
        uuid=uuid,
        experiment_id=1,
        trial_id=trial,
        total_batches=batches,
        state=state_of(CheckpointState, state),
        size=1,
        validation_metrics=metrics,
        _session=None,  # type: ignore[arg-type]  # never called here
    )


CHECKPOINTS = [
    _checkpoint("a", 10, 0.5),
    _checkpoint("b", 20, 0.2),
    _checkpoint("c", 30, None),
    _checkpoint("d", 40, 0.2, trial=2),
    _checkpoint("e", 50, 0.1, state="DELETED"),
]


def test_by_default_the_best_searcher_metric_comes_first_and_unvalidated_ones_last() -> None:
    order = [c.uuid for c in sorted_checkpoints(CHECKPOINTS, None, None, "error", True)]
    # d and b tie at 0.2: the more-trained first; a deleted one is never "best".
    assert order[:3] == ["d", "b", "a"] and set(order[3:]) == {"c", "e"}


def test_a_larger_is_better_metric_reverses_the_ranking() -> None:
    assert [c.uuid for c in ranked_checkpoints(CHECKPOINTS, "error", False)] == ["a", "d", "b"]


def test_sorting_by_a_field_in_either_order() -> None:
    asc = sorted_checkpoints(CHECKPOINTS, CheckpointSortBy.BATCH_NUMBER, OrderBy.ASC, "error", True)
    assert [c.total_batches for c in asc] == [10, 20, 30, 40, 50]
    desc = sorted_checkpoints(CHECKPOINTS, CheckpointSortBy.UUID, OrderBy.DESC, "error", True)
    assert [c.uuid for c in desc] == ["e", "d", "c", "b", "a"]


def test_sorting_by_a_metric_name_ascending_puts_the_smallest_first() -> None:
    order = sorted_checkpoints(CHECKPOINTS, "error", OrderBy.DESC, "loss", True)
    assert [c.uuid for c in order][:3] == ["a", "d", "b"]


def test_sort_by_and_order_by_go_together() -> None:
    with pytest.raises(ValueError, match="give both or neither"):
        sorted_checkpoints(CHECKPOINTS, CheckpointSortBy.UUID, None, "error", True)


def test_states_equal_pedls_names_and_an_unknown_one_is_unspecified() -> None:
    assert state_of(ExperimentState, "COMPLETED") == "COMPLETED" == ExperimentState.COMPLETED
    assert state_of(ExperimentState, "SOMETHING_NEW") is ExperimentState.UNSPECIFIED
    assert str(ExperimentState.PAUSED) == "PAUSED"
