"""Trial timelines: each run's phases, as the scheduler, its agent and its harness timed them."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import bindparam, insert, select

from pedl_scheduler.storage.connection import Storage
from pedl_scheduler.storage.tables import trial_timelines

_ADD = insert(trial_timelines)
_OF = (
    select(trial_timelines.c.phases_json)
    .where(trial_timelines.c.trial_id == bindparam("trial_id"))
    .order_by(trial_timelines.c.run_id, trial_timelines.c.id)
)


def add_run(s: Storage, trial_id: int, run_id: int, phases: list[dict[str, Any]]) -> None:
    s.defer(_ADD, {"trial_id": trial_id, "run_id": run_id, "phases_json": json.dumps(phases)})


def of_trial(s: Storage, trial_id: int) -> list[dict[str, Any]]:
    """Every run's phases, run by run, each run's in the order they started."""
    out: list[dict[str, Any]] = []
    for row in s.rows(_OF, {"trial_id": trial_id}):
        out.extend(json.loads(row["phases_json"]))
    return out
