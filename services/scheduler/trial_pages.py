"""What one GetTrial call returns of a trial's history: every step (a client from before paging) or a
page of steps with the validations and checkpoints that fall inside it."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from pedl._metrics import to_struct
from pedl.metric_summary import fold
from pedl.v1 import scheduler_pb2
from pedl_scheduler import paging, trial_results
from pedl_scheduler.storage.connection import Row, Storage
from pedl_scheduler.storage.ops import metric_groups as group_ops
from pedl_scheduler.storage.ops import results as result_ops


@dataclass(frozen=True)
class TrialPage:
    steps: list[Row]
    validations: list[Row]
    checkpoints: list[Row]
    num_steps: int
    next_page_token: str


def requested_page(db: Storage, trial_id: int, request: scheduler_pb2.GetTrialRequest) -> TrialPage:
    """The page a GetTrial request asks for."""
    with_deleted = request.include_deleted_checkpoints
    return trial_page(db, trial_id, request.page_size, request.page_token, with_deleted)


def trial_page(
    db: Storage, trial_id: int, page_size: int, page_token: str, with_deleted: bool = False
) -> TrialPage:
    """Raises paging.PageError naming a bad page_size or page_token. with_deleted: the checkpoints
    deleted or garbage-collected too, not only the live ones."""
    if page_size == 0 and not page_token:
        steps = result_ops.steps_of(db, trial_id)
        return TrialPage(
            steps,
            result_ops.validations_of(db, trial_id),
            result_ops.checkpoints_of(db, trial_id, with_deleted),
            len(steps),
            "",
        )
    limit, after = paging.page_size(page_size), paging.after_id(page_token)
    steps = result_ops.steps_page(db, trial_id, after, limit)
    next_token = paging.next_token([s["total_batches"] for s in steps], limit)
    upto = int(next_token) if next_token else None
    return TrialPage(
        steps,
        result_ops.validations_between(db, trial_id, after, upto),
        result_ops.checkpoints_between(db, trial_id, after, upto, with_deleted),
        result_ops.step_count_of(db, trial_id),
        next_token,
    )


def results_of_trials(db: Storage, ids: list[int], include_steps: bool) -> dict[int, dict[str, Any]]:
    """Each trial's steps (when asked for), validations and checkpoints, read for all of them at once."""
    return trial_results.group(
        ids,
        steps=result_ops.steps_of_trials(db, ids) if include_steps else [],
        validations=result_ops.validations_of_trials(db, ids),
        checkpoints=result_ops.checkpoints_of_trials(db, ids),
    )


def group_summaries(db: Storage, trial_id: int, figures: bool) -> list[scheduler_pb2.MetricGroupSummary]:
    """Each custom metric group of the trial by name: its reports and last batch count (one grouped
    query, no rows read) or, with `figures`, each metric's too, folded from all its reports."""
    if not figures:
        return [
            scheduler_pb2.MetricGroupSummary(group=group, reports=n, last_batches=last)
            for group, n, last in group_ops.counts_of_trial(db, trial_id)
        ]
    out = []
    for group, rows in itertools.groupby(group_ops.of_trial(db, trial_id), key=lambda r: r[0]):
        reports = list(rows)
        out.append(
            scheduler_pb2.MetricGroupSummary(
                group=group,
                reports=len(reports),
                last_batches=reports[-1][1],
                metrics=to_struct(fold(json.loads(r[2]) for r in reports)),
            )
        )
    return out
